//! A TCP proxy on a loopback port that can cut the network between a client and a server without either of
//! them noticing at the socket level: the partitions of a real network, reproduced in a test process.
//!
//! * [`Link::Up`]: bytes flow both ways.
//! * [`Link::Partitioned`]: the proxy stops reading from both sides. Connections stay open, nothing is lost:
//!   what was sent waits in the kernel's buffers and arrives after [`FaultProxy::heal`], as TCP retransmission
//!   would deliver it after a real partition heals. New connections are accepted but carry nothing until then
//!   (a client sees a connect that never answers, not a refusal).
//! * [`FaultProxy::reset`]: every open connection is closed at once (what a crashed peer or a firewall that
//!   rejects looks like); new ones work while the link is up.
//! * [`FaultProxy::set_latency`]: every chunk of bytes is delivered that long after it was read, in both
//!   directions, without limiting how many are in flight (a slow link or a server too busy to answer
//!   promptly, as a whole cluster restarting makes it).
//!
//! Used by the fault tests to check that a store session is declared lost before the server can expire it.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The state of the proxied link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// Bytes flow both ways.
    Up,
    /// Nothing flows; connections stay open.
    Partitioned,
}

/// A proxy from a loopback port to one server address. Dropping it closes every connection.
#[derive(Debug)]
pub struct FaultProxy {
    address: SocketAddr,
    link: watch::Sender<Link>,
    /// Bumped by [`FaultProxy::reset`]; every connection task ends when it changes.
    epoch: watch::Sender<u64>,
    /// Added to the delivery of every chunk; zero at the start.
    latency: watch::Sender<Duration>,
    acceptor: JoinHandle<()>,
}

impl FaultProxy {
    /// Listens on a free loopback port and forwards every connection to `target`.
    pub async fn start(target: SocketAddr) -> std::io::Result<FaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let (link, _) = watch::channel(Link::Up);
        let (epoch, _) = watch::channel(0u64);
        let (latency, _) = watch::channel(Duration::ZERO);
        let links = link.subscribe();
        let epochs = epoch.subscribe();
        let latencies = latency.subscribe();
        let acceptor = tokio::spawn(accept_loop(listener, target, links, epochs, latencies));
        Ok(FaultProxy {
            address,
            link,
            epoch,
            latency,
            acceptor,
        })
    }

    /// The address clients connect to (`127.0.0.1:port`).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The current state of the link.
    pub fn link(&self) -> Link {
        *self.link.borrow()
    }

    /// Stops all traffic, keeping connections open.
    pub fn partition(&self) {
        self.link.send_replace(Link::Partitioned);
    }

    /// Lets traffic flow again; what waited is delivered.
    pub fn heal(&self) {
        self.link.send_replace(Link::Up);
    }

    /// Closes every open connection.
    pub fn reset(&self) {
        self.epoch.send_modify(|e| *e += 1);
    }

    /// Delivers every chunk read from now on `latency` after it was read (one way; a request and its
    /// answer take twice that). Zero turns it off.
    pub fn set_latency(&self, latency: Duration) {
        self.latency.send_replace(latency);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.acceptor.abort();
        self.reset();
    }
}

async fn accept_loop(
    listener: TcpListener,
    target: SocketAddr,
    link: watch::Receiver<Link>,
    epoch: watch::Receiver<u64>,
    latency: watch::Receiver<Duration>,
) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        let link = link.clone();
        let latency = latency.clone();
        let mut epoch = epoch.clone();
        epoch.mark_unchanged();
        tokio::spawn(async move {
            let mut waiting = link.clone();
            // A connection opened during a partition reaches the server only once it heals.
            if waiting.wait_for(|l| *l == Link::Up).await.is_err() {
                return;
            }
            let Ok(server) = TcpStream::connect(target).await else {
                return;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = server.into_split();
            tokio::select! {
                _ = pump(client_read, server_write, link.clone(), latency.clone()) => {}
                _ = pump(server_read, client_write, link, latency) => {}
                _ = epoch.changed() => {}
            }
            // Dropping both halves of both sockets closes the connection on both sides.
        });
    }
}

/// Copies `from` to `to` while the link is up; during a partition reads nothing, so the sender's data waits
/// in the kernel. A chunk is written the current latency after it was read, in order; reading goes on
/// meanwhile, so a latency delays the bytes without throttling them.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    to: tokio::net::tcp::OwnedWriteHalf,
    mut link: watch::Receiver<Link>,
    latency: watch::Receiver<Duration>,
) {
    let (chunks, queued) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let writer = deliver(queued, to, link.clone());
    let reader = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            if link.wait_for(|l| *l == Link::Up).await.is_err() {
                return;
            }
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let due = Instant::now() + *latency.borrow();
            if chunks.send((due, buf[..n].to_vec())).is_err() {
                return;
            }
        }
    };
    // A failed write ends the connection; an end of input is passed on once what was read before it is
    // delivered.
    tokio::pin!(writer);
    tokio::select! {
        _ = &mut writer => return,
        _ = reader => {}
    }
    writer.await;
}

/// Writes queued chunks to `to`, each no earlier than its due time and only while the link is up.
async fn deliver(
    mut queued: mpsc::UnboundedReceiver<(Instant, Vec<u8>)>,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut link: watch::Receiver<Link>,
) {
    while let Some((due, bytes)) = queued.recv().await {
        tokio::time::sleep_until(due).await;
        // Bytes read just before a partition are held until it heals, like any other.
        if link.wait_for(|l| *l == Link::Up).await.is_err() {
            return;
        }
        if to.write_all(&bytes).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn echo_server() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        address
    }

    async fn read_some(s: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
        let mut buf = [0u8; 1024];
        match tokio::time::timeout(within, s.read(&mut buf)).await {
            Ok(Ok(n)) => Some(buf[..n].to_vec()),
            _ => None,
        }
    }

    #[tokio::test]
    async fn partition_holds_bytes_and_heal_delivers_them() {
        let proxy = FaultProxy::start(echo_server().await).await.unwrap();
        let mut s = TcpStream::connect(proxy.address()).await.unwrap();
        s.write_all(b"one").await.unwrap();
        assert_eq!(
            read_some(&mut s, Duration::from_secs(5)).await.unwrap(),
            b"one"
        );
        proxy.partition();
        assert_eq!(proxy.link(), Link::Partitioned);
        s.write_all(b"two").await.unwrap();
        assert_eq!(read_some(&mut s, Duration::from_millis(300)).await, None);
        proxy.heal();
        assert_eq!(
            read_some(&mut s, Duration::from_secs(5)).await.unwrap(),
            b"two"
        );
    }

    #[tokio::test]
    async fn connection_opened_during_a_partition_waits_for_the_heal() {
        let proxy = FaultProxy::start(echo_server().await).await.unwrap();
        proxy.partition();
        let mut s = TcpStream::connect(proxy.address()).await.unwrap();
        s.write_all(b"late").await.unwrap();
        assert_eq!(read_some(&mut s, Duration::from_millis(300)).await, None);
        proxy.heal();
        assert_eq!(
            read_some(&mut s, Duration::from_secs(5)).await.unwrap(),
            b"late"
        );
    }

    #[tokio::test]
    async fn latency_delays_each_way_without_losing_bytes() {
        let proxy = FaultProxy::start(echo_server().await).await.unwrap();
        proxy.set_latency(Duration::from_millis(400));
        let mut s = TcpStream::connect(proxy.address()).await.unwrap();
        s.write_all(b"slow").await.unwrap();
        // There and back: 800 ms at least, whatever the machine's speed.
        assert_eq!(read_some(&mut s, Duration::from_millis(500)).await, None);
        assert_eq!(
            read_some(&mut s, Duration::from_secs(5)).await.unwrap(),
            b"slow"
        );
        proxy.set_latency(Duration::ZERO);
        s.write_all(b"fast").await.unwrap();
        assert_eq!(
            read_some(&mut s, Duration::from_secs(5)).await.unwrap(),
            b"fast"
        );
    }

    #[tokio::test]
    async fn reset_closes_open_connections_only() {
        let proxy = FaultProxy::start(echo_server().await).await.unwrap();
        let mut s = TcpStream::connect(proxy.address()).await.unwrap();
        s.write_all(b"x").await.unwrap();
        assert_eq!(
            read_some(&mut s, Duration::from_secs(5)).await.unwrap(),
            b"x"
        );
        proxy.reset();
        assert_eq!(
            read_some(&mut s, Duration::from_secs(5)).await,
            Some(Vec::new()),
            "closed"
        );
        let mut again = TcpStream::connect(proxy.address()).await.unwrap();
        again.write_all(b"y").await.unwrap();
        assert_eq!(
            read_some(&mut again, Duration::from_secs(5)).await.unwrap(),
            b"y"
        );
    }
}
