//! Why a store's servers cannot be reached, for the error a first connection reports: each `host:port` is
//! resolved and dialled over TCP (at most `timeout` each), and the outcome named — no such host, connection
//! refused, no answer, or accepting connections (then the server does not speak the protocol in time).

use std::time::Duration;

/// `host:port` of an address given as `host:port` or `scheme://host:port[/…]`.
pub(crate) fn host_port(address: &str) -> &str {
    let rest = address.split_once("://").map_or(address, |(_, r)| r);
    rest.split('/').next().unwrap_or(rest)
}

/// One server's reachability, in words.
async fn probe(address: &str, timeout: Duration) -> String {
    let target = host_port(address);
    let addrs: Vec<std::net::SocketAddr> = match tokio::net::lookup_host(target).await {
        Ok(a) => a.collect(),
        Err(e) => return format!("{target}: no such host ({e})"),
    };
    let Some(first) = addrs.first() else {
        return format!("{target}: no such host (no address)");
    };
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(first)).await {
        Ok(Ok(_)) => {
            format!("{target}: accepts connections, but the server did not answer in time")
        }
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            format!("{target}: connection refused (nothing listens on {first})")
        }
        Ok(Err(e)) => format!("{target}: {e}"),
        Err(_) => format!(
            "{target}: no answer within {:.1}s (a firewall, a partition or a stopped host)",
            timeout.as_secs_f64()
        ),
    }
}

/// Every server's reachability, joined with `; `.
pub(crate) async fn diagnose(addresses: Vec<String>, timeout: Duration) -> String {
    let mut out = Vec::new();
    for a in &addresses {
        out.push(probe(a.trim(), timeout).await);
    }
    out.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_strips_schemes_and_paths() {
        assert_eq!(host_port("127.0.0.1:2181"), "127.0.0.1:2181");
        assert_eq!(host_port("http://10.0.0.1:2379"), "10.0.0.1:2379");
        assert_eq!(host_port("https://h:2379/v3"), "h:2379");
    }

    #[tokio::test]
    async fn names_refused_connections_and_unknown_hosts() {
        // A port nobody listens on: bind, learn the port, close.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let refused = format!("127.0.0.1:{port}");
        let text = diagnose(
            vec![refused.clone(), "no-such-host.invalid:2181".into()],
            Duration::from_secs(2),
        )
        .await;
        assert!(
            text.contains(&format!("{refused}: connection refused")),
            "{text}"
        );
        assert!(
            text.contains("no-such-host.invalid:2181: no such host"),
            "{text}"
        );
        // A listening socket that never speaks.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let quiet = l.local_addr().unwrap().to_string();
        let text = diagnose(vec![quiet], Duration::from_secs(2)).await;
        assert!(text.contains("accepts connections"), "{text}");
    }
}
