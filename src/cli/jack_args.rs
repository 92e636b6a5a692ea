//! The JACK client flags shared by every engine-based command (`run`, `load`, `sched`, `rtl`,
//! `event`): one definition so they read and validate the same everywhere.

use crate::driver::jack::JackConfig;
use crate::error::{Error, Result};
use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct JackArgs {
    /// jack: server name [default: $JACK_DEFAULT_SERVER or "default"].
    #[arg(long, value_name = "NAME")]
    pub server: Option<String>,
    /// jack: our client name.
    #[arg(long, value_name = "NAME", default_value = "xrunlab")]
    pub client_name: String,
    /// jack: connect ports, e.g. in=system:capture_1,in=system:capture_2,out=system:playback_1.
    /// Without in= ports the engine processes the --input signal.
    #[arg(long, value_name = "in=PORT,…,out=PORT,…")]
    pub connect: Option<String>,
    /// jack: apply --buffer to the server with jack_set_buffer_size instead of refusing a
    /// size that differs from the server's.
    #[arg(long)]
    pub set_buffer: bool,
}

impl JackArgs {
    fn any_given(&self) -> bool {
        self.server.is_some()
            || self.client_name != "xrunlab"
            || self.connect.is_some()
            || self.set_buffer
    }

    /// The client configuration when `jack` is the driver; with any other driver, the JACK
    /// flags are a usage error rather than silently ignored.
    pub fn to_config(
        &self,
        jack: bool,
        buffer: Option<u32>,
        rate: Option<u32>,
    ) -> Result<Option<JackConfig>> {
        if !jack {
            if self.any_given() {
                return Err(Error::usage(
                    "--server, --client-name, --connect and --set-buffer need --driver jack",
                ));
            }
            return Ok(None);
        }
        use crate::driver::jack::names;
        match &self.server {
            Some(s) => names::check_server(s, "--server")?,
            None => names::check_environment()?,
        }
        names::check_client(&self.client_name, "--client-name")?;
        if self.set_buffer && buffer.is_none() {
            return Err(Error::usage(
                "--set-buffer needs a size to set (--buffer N; for load, --buffers LIST)",
            ));
        }
        let mut j = JackConfig {
            server: self.server.clone(),
            client_name: self.client_name.clone(),
            set_buffer: self.set_buffer,
            buffer_requested: buffer,
            rate_requested: rate,
            ..Default::default()
        };
        if let Some(spec) = &self.connect {
            j.parse_connect(spec)?;
        }
        Ok(Some(j))
    }
}
