//! `rtloop view`: serve the live page of every stream (the viewer library does the work).

use std::net::IpAddr;

use anyhow::Result;
use rtloop_view::{ViewConfig, Viewer};

use crate::Global;

/// Arguments of `rtloop view`.
#[derive(clap::Args, Debug, Clone)]
pub struct ViewArgs {
    /// Address to listen on. The default shows the page to this machine only; any other
    /// address (0.0.0.0 for every interface) shows it to other machines, and then every
    /// request must carry the access token printed in the URL.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Port (0: any free one; the URL printed says which).
    #[arg(long, default_value_t = 8765)]
    pub port: u16,
    /// The access token to ask for (default: a random one when --bind is not a loopback
    /// address, none on loopback).
    #[arg(long, env = "RTLOOP_VIEW_TOKEN")]
    pub token: Option<String>,
    /// Stop after this many seconds (default: until Ctrl-C or SIGTERM).
    #[arg(long, value_parser = crate::cmd_demo::seconds)]
    pub duration: Option<f64>,
}

/// Serve until Ctrl-C, SIGTERM or --duration.
pub fn run(a: &ViewArgs, g: &Global) -> Result<()> {
    if let Some(t) = &a.token {
        if t.len() < 16
            || !t
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            anyhow::bail!(
                "--token must be at least 16 characters from A-Z a-z 0-9 - _ (it goes in a URL)"
            );
        }
    }
    let viewer = Viewer::start(&ViewConfig {
        bind: a.bind,
        port: a.port,
        token: a.token.clone(),
    })?;
    if g.json {
        println!(
            "{}",
            serde_json::json!({ "event": "listening", "url": viewer.url() })
        );
    } else {
        println!("rtloop view: open {}", viewer.url());
    }
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    crate::cmd_serve::wait_for_stop(a.duration);
    viewer.stop();
    Ok(())
}
