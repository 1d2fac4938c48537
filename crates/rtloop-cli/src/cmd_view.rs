//! `rtloop view`: serve the live page of every stream (the viewer library does the work).

use std::net::IpAddr;
use std::time::Duration;

use anyhow::Result;
use rtloop_view::{ViewConfig, Viewer};

use crate::Global;

/// Arguments of `rtloop view`.
#[derive(clap::Args, Debug, Clone)]
pub struct ViewArgs {
    /// Address to listen on. The default shows the page to this machine only; any other
    /// address (0.0.0.0 for every interface) shows it to other machines.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Port (0: any free one; the URL printed says which).
    #[arg(long, default_value_t = 8765)]
    pub port: u16,
    /// The access token every request must carry (default: a random one). The URL printed
    /// carries it (`?token=...`).
    #[arg(long, env = "RTLOOP_VIEW_TOKEN")]
    pub token: Option<String>,
    /// A host name the page may also be reached by (repeatable), such as this machine's name
    /// on the network; requests naming any other host are refused.
    #[arg(long = "allow-host", value_name = "NAME")]
    pub allow_hosts: Vec<String>,
    /// Seconds a connection has to send a request's header, from when it connected or got
    /// its last answer; slower or idle connections are closed.
    #[arg(long, env = "RTLOOP_VIEW_HEADER_TIMEOUT", default_value_t = 10.0,
          value_parser = header_timeout)]
    pub header_timeout: f64,
    /// Most connections open at once (fewer if the open-file limit leaves less room); when
    /// all are taken, the one idle longest is closed to make room.
    #[arg(long, env = "RTLOOP_VIEW_MAX_CONNECTIONS", default_value_t = 256,
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub max_connections: u32,
    /// Stop after this many seconds (default: until Ctrl-C or SIGTERM).
    #[arg(long, value_parser = crate::cmd_demo::seconds)]
    pub duration: Option<f64>,
}

fn header_timeout(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.001..=3600.0).contains(&v) => Ok(v),
        _ => Err(format!("expected seconds from 0.001 to 3600, got {s:?}")),
    }
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
    for h in &a.allow_hosts {
        let name = h.strip_prefix('[').and_then(|v| v.strip_suffix(']'));
        let ok = match name {
            Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
            None => {
                !h.is_empty()
                    && h.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
            }
        };
        if !ok {
            anyhow::bail!(
                "--allow-host takes a host name or address without a port (letters, digits, . \
                 and -, or [IPv6]), got {h:?}"
            );
        }
    }
    let viewer = Viewer::start(&ViewConfig {
        bind: a.bind,
        port: a.port,
        token: a.token.clone(),
        allowed_hosts: a.allow_hosts.clone(),
        header_timeout: Duration::from_secs_f64(a.header_timeout),
        max_connections: a.max_connections as usize,
    })?;
    let stop = crate::cmd_serve::stop_on_signal();
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
    crate::cmd_serve::wait_until(&stop, a.duration);
    viewer.stop();
    Ok(())
}
