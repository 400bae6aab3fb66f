//! The gateway's page of the documentation lists every component the
//! gateway supervises, and the list of all components holds every one the
//! gateway registers.

use std::collections::BTreeSet;

use super::supervisor::ComponentKind;

const GATEWAY_PAGE: &str = include_str!("../../docs/gateway.md");

/// The names the page's `## Components` section lists: each item's
/// leading code span.
fn documented() -> BTreeSet<&'static str> {
    let section = GATEWAY_PAGE
        .split_once("\n## Components\n")
        .expect("docs/gateway.md has a `## Components` section")
        .1;
    let section = section.split("\n## ").next().unwrap_or(section);
    section
        .lines()
        .filter_map(|line| line.strip_prefix("* `"))
        .filter_map(|rest| rest.split_once('`'))
        .map(|(name, _)| name)
        .collect()
}

fn all() -> BTreeSet<&'static str> {
    ComponentKind::ALL.iter().map(|k| k.name()).collect()
}

#[test]
fn the_gateway_page_lists_every_supervised_component_and_no_other() {
    let documented = documented();
    let all = all();
    let missing: Vec<_> = all.difference(&documented).collect();
    assert!(
        missing.is_empty(),
        "docs/gateway.md (## Components) does not name {missing:?}"
    );
    let unknown: Vec<_> = documented.difference(&all).collect();
    assert!(
        unknown.is_empty(),
        "docs/gateway.md (## Components) names {unknown:?}, which the gateway does not run"
    );
}

#[test]
fn every_registered_component_is_in_the_list_of_all() {
    let mut registered: BTreeSet<&str> = super::components()
        .iter()
        .map(|c| c.kind().name())
        .collect();
    // The control API is supervised apart, once the webhook runs a crash
    // left are resumed; its listener is the gateway's socket.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a local socket");
    let control_api = super::ControlApi {
        listener,
        server_stop: tokio_util::sync::CancellationToken::new(),
    };
    registered.insert(super::supervisor::Component::kind(&control_api).name());
    // So is the command socket, when the command line gives its answerer.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let command_socket = super::commands::CommandSocket::open(dir.path(), |_, _| {
        crate::gateway_client::forward::ForwardAnswer::Declined {
            reason: String::new(),
        }
    })
    .expect("a socket");
    registered.insert(super::supervisor::Component::kind(&command_socket).name());
    assert_eq!(registered, all());
}
