//! The client side: how commands reach a running gateway. It is found
//! only through `gateway.json` ([`super::discovery::running`]) and spoken to
//! over plain HTTP/1.1 on its address with its token.

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::Value;

use super::discovery::{self, GatewayInfo};
use crate::config::Config;
use crate::host::Host;
use crate::paths::Paths;

/// A command needs the gateway and none runs.
#[derive(Debug, thiserror::Error)]
#[error("gateway not running (start it with `almanac gateway run`)")]
pub(crate) struct NotRunning;

/// The gateway answered with an error.
#[derive(Debug, thiserror::Error)]
#[error("the gateway answered {status}: {message}")]
pub(crate) struct Refused {
    pub status: u16,
    pub message: String,
}

/// A running gateway, ready to be asked.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    pub info: GatewayInfo,
    token: String,
}

impl Client {
    /// The gateway of the state directory of `paths`, if one runs.
    pub(crate) fn find(
        paths: &Paths,
        config: &Config,
        host: &Host,
    ) -> anyhow::Result<Option<Client>> {
        let Some(info) = discovery::running(paths) else {
            return Ok(None);
        };
        let token = discovery::token(paths, config, host, false)?
            .map(|(t, _)| t)
            .unwrap_or_default();
        Ok(Some(Client { info, token }))
    }

    /// [`Client::find`], or [`NotRunning`].
    pub(crate) fn require(paths: &Paths, config: &Config, host: &Host) -> anyhow::Result<Client> {
        Client::find(paths, config, host)?.ok_or_else(|| NotRunning.into())
    }

    /// `GET path` → the JSON answer.
    pub(crate) fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.call("GET", path, None, Duration::from_secs(10))
    }

    /// `POST path` with a JSON body → the JSON answer; `limit` bounds the
    /// wait (a turn can take minutes).
    pub(crate) fn post(&self, path: &str, body: &Value, limit: Duration) -> anyhow::Result<Value> {
        self.call("POST", path, Some(body), limit)
    }

    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        limit: Duration,
    ) -> anyhow::Result<Value> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (status, bytes) = runtime.block_on(async {
            tokio::time::timeout(limit, self.exchange(method, path, body))
                .await
                .map_err(|_| {
                    anyhow::anyhow!("the gateway did not answer within {} s", limit.as_secs())
                })?
        })?;
        let value: Value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        if !(200..300).contains(&status) {
            let message = value["error"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| value.to_string());
            return Err(Refused { status, message }.into());
        }
        Ok(value)
    }

    async fn exchange(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<(u16, Bytes)> {
        let base = self.info.base_url();
        let authority = base.trim_start_matches("http://").to_string();
        let stream = tokio::net::TcpStream::connect(socket_of(&self.info))
            .await
            .map_err(|e| anyhow::anyhow!("cannot connect to the gateway at {base}: {e}"))?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        let driving = tokio::spawn(connection);
        let bytes = body
            .map(|b| serde_json::to_vec(b).expect("JSON serialises"))
            .unwrap_or_default();
        let request = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, authority)
            .header(
                hyper::header::AUTHORIZATION,
                format!("Bearer {}", self.token),
            )
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(bytes)))?;
        let response = sender.send_request(request).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        driving.abort();
        Ok((status, body))
    }
}

fn socket_of(info: &GatewayInfo) -> std::net::SocketAddr {
    let ip: std::net::IpAddr = match info.address.as_str() {
        "0.0.0.0" => std::net::Ipv4Addr::LOCALHOST.into(),
        "::" => std::net::Ipv6Addr::LOCALHOST.into(),
        a => a.parse().unwrap_or(std::net::Ipv4Addr::LOCALHOST.into()),
    };
    std::net::SocketAddr::new(ip, info.port)
}
