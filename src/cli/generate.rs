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
        std::fs::create_dir_all(d).map_err(|e| io(d, e))?;
    }
    clap_mangen::generate_to(super::command(), &man).map_err(|e| io(&man, e))?;
    for (shell, name) in [
        (Shell::Bash, "xrunlab.bash"),
        (Shell::Zsh, "_xrunlab"),
        (Shell::Fish, "xrunlab.fish"),
    ] {
        let path = comp.join(name);
        let mut f = std::fs::File::create(&path).map_err(|e| io(&path, e))?;
        clap_complete::generate(shell, &mut super::command(), "xrunlab", &mut f);
    }
    Ok(0)
}
