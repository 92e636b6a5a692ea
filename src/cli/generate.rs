//! `xrunlab __generate DIR` (hidden): the man pages (one per subcommand) and the bash, zsh
//! and fish completions, generated from this binary's own CLI definition so that they can
//! never describe options it does not have. The Debian package is made of them
//! (scripts/build-deb; `cargo deb` after running this into target/assets).

use crate::error::{Error, Result};
use clap::Args;
use clap_complete::Shell;
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Directory receiving man/*.1 and completions/{xrunlab.bash,_xrunlab,xrunlab.fish}.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

fn io(what: &Path, e: std::io::Error) -> Error {
    Error::io(format!("writing {}", what.display()), e)
}

pub fn run(a: GenerateArgs) -> Result<u8> {
    if !a.dir.is_dir() {
        return Err(Error::usage(format!(
            "{}: not a directory",
            a.dir.display()
        )));
    }
    let man = a.dir.join("man");
    let comp = a.dir.join("completions");
    for d in [&man, &comp] {
        // A link planted at `man` would send root's files into a directory someone else chose.
        if std::fs::symlink_metadata(d).is_ok_and(|m| !m.is_dir()) {
            return Err(Error::usage(format!(
                "{}: not a directory (a symbolic link or a file is there): remove it and run again",
                d.display()
            )));
        }
        std::fs::create_dir_all(d).map_err(|e| io(d, e))?;
    }
    // Each page through the one writer (docs/ARCHITECTURE.md §2 "Writing"), which
    // clap_mangen's own `generate_to` (a plain `File::create`) is not.
    fn pages(cmd: clap::Command, man: &Path) -> Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
            pages(sub, man)?;
        }
        let page = clap_mangen::Man::new(cmd);
        let path = man.join(page.get_filename());
        let mut text = Vec::new();
        page.render(&mut text).map_err(|e| io(&path, e))?;
        crate::results::write_atomic_derived(&path, &text)
    }
    let mut cmd = super::command().disable_help_subcommand(true);
    cmd.build();
    pages(cmd, &man)?;
    for (shell, name) in [
        (Shell::Bash, "xrunlab.bash"),
        (Shell::Zsh, "_xrunlab"),
        (Shell::Fish, "xrunlab.fish"),
    ] {
        let mut text = Vec::new();
        clap_complete::generate(shell, &mut super::command(), "xrunlab", &mut text);
        crate::results::write_atomic_derived(&comp.join(name), &text)?;
    }
    Ok(0)
}
