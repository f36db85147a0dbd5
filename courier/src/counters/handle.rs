//! The counters room's entry points on the [`Runtime`] handle: querying
//! counters by name and serving them to Prometheus. Everything else of the
//! room is reached from these two.

use std::net::SocketAddr;

use super::{CounterError, CounterSet, MetricsServer};
use crate::runtime::Runtime;

impl Runtime {
    /// A set of the counters named by `names` (HPX grammar, wildcards and
    /// derived counters allowed; see `COUNTERS.md`). Fails at once on a
    /// malformed name, an unknown counter type, or a locality the job does
    /// not have.
    ///
    /// # Examples
    ///
    /// ```
    /// use courier::{Config, TransportKind};
    ///
    /// courier::launch(Config::new().localities(2).transport(TransportKind::Inproc), |rt| async move {
    ///     let mut set = rt.counters(["/threads{locality#*/total}/count/cumulative"])?;
    ///     assert_eq!(set.evaluate(false).await?.len(), 2);
    ///     assert!(rt.counters(["/no/such/counter"]).is_err());
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn counters<I, S>(&self, names: I) -> Result<CounterSet, CounterError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        CounterSet::open(self, names)
    }

    /// Serves every counter of the job at `http://ADDR/metrics` in the
    /// Prometheus text format until the returned server is dropped.
    ///
    /// The server binds `addr` exactly as given and has no
    /// authentication: anyone who can reach it reads every counter, so
    /// prefer a loopback address (a non-loopback one is reported with a
    /// `tracing` warning). It serves clients concurrently, bounds each
    /// request's size and time, and dropping it returns promptly whatever
    /// its clients are doing (see [`MetricsServer`]).
    ///
    /// # Errors
    ///
    /// Binding `addr` failed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// use courier::{Config, TransportKind};
    ///
    /// // Two workers: the main task blocks one of them while it waits for
    /// // the scrape, and the scrape needs a worker to sample locality 0.
    /// let config = Config::new().localities(2).workers(2).transport(TransportKind::Inproc);
    /// courier::launch(config, |rt| async move {
    ///     let server = rt.serve_metrics("127.0.0.1:0".parse()?)?;
    ///     let body = std::thread::spawn(move || {
    ///         let mut s = std::net::TcpStream::connect(server.local_addr()).unwrap();
    ///         s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    ///         let mut body = String::new();
    ///         s.read_to_string(&mut body).unwrap();
    ///         body
    ///     })
    ///     .join()
    ///     .unwrap();
    ///     assert!(body.contains("courier_parcels_count_sent_total{locality=\"1\",instance=\"total\"}"));
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn serve_metrics(&self, addr: SocketAddr) -> std::io::Result<MetricsServer> {
        MetricsServer::start(self, addr)
    }
}
