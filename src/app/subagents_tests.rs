use super::*;
use crate::tasks::NewTask;

const NOW: i64 = 1_800_000_000_000;

/// A subagent run of `parent` in `child`, created at `at`, with `status`.
fn run(
    ledger: &mut Ledger,
    parent: &str,
    child: &str,
    label: &str,
    at: i64,
    status: Status,
) -> Task {
    let mut new = NewTask::new(Runtime::Subagent, child, format!("task of {child}"));
    new.requester_session_key = parent.to_string();
    new.child_session_key = Some(child.to_string());
    new.label = Some(label.to_string());
    new.run_id = Some(format!("run-{child}"));
    new.agent_id = Some("main".to_string());
    let mut task = ledger.create(new, at).unwrap();
    task.status = status;
    if status.is_terminal() {
        task.started_at = Some(at);
        task.ended_at = Some(at + 1000);
    }
    task
}

fn family() -> Vec<Task> {
    let mut l = Ledger::open_in_memory().unwrap();
    vec![
        run(
            &mut l,
            "agent:main:main",
            "c1",
            "alpha",
            NOW - 50_000,
            Status::Running,
        ),
        run(
            &mut l,
            "agent:main:other",
            "c2",
            "beta",
            NOW - 40_000,
            Status::Queued,
        ),
        run(&mut l, "c1", "g1", "grand", NOW - 30_000, Status::Running),
        run(
            &mut l,
            "agent:main:main",
            "c3",
            "old",
            NOW - RECENT_MS - 10_000,
            Status::Succeeded,
        ),
        run(
            &mut l,
            "agent:main:main",
            "c4",
            "gamma",
            NOW - 20_000,
            Status::Failed,
        ),
    ]
}

#[test]
fn a_scope_holds_its_children_and_grandchildren_and_the_list_drops_old_ended_runs() {
    let runs = select(family(), Some("agent:main:main"), NOW);
    let all: Vec<&str> = runs.all.iter().map(run_id).collect();
    assert_eq!(all, ["run-c1", "run-g1", "run-c3", "run-c4"]);
    let listed: Vec<&str> = runs.listed.iter().map(run_id).collect();
    assert_eq!(listed, ["run-c1", "run-g1", "run-c4"]);
    let views = views(&runs.listed, NOW);
    assert_eq!(views[2].index, 3);
    assert_eq!(views[2].runtime_ms, Some(1000));
    assert_eq!(select(family(), None, NOW).all.len(), 5);
}

#[test]
fn targets_name_runs_by_number_id_label_prefix_or_all() {
    let runs = select(family(), Some("agent:main:main"), NOW);
    let ids = |found: Result<Vec<&Task>, TargetError>| -> Vec<String> {
        found
            .unwrap()
            .iter()
            .map(|t| run_id(t).to_string())
            .collect()
    };
    assert_eq!(ids(resolve(&runs, "#2")), ["run-g1"]);
    assert_eq!(ids(resolve(&runs, "3")), ["run-c4"]);
    assert_eq!(ids(resolve(&runs, "run-c3")), ["run-c3"]);
    assert_eq!(ids(resolve(&runs, "c1")), ["run-c1"]);
    assert_eq!(ids(resolve(&runs, "grand")), ["run-g1"]);
    assert_eq!(ids(resolve(&runs, "all")), ["run-c1", "run-g1"]);
    assert!(matches!(
        resolve(&runs, "run-c"),
        Err(TargetError::Ambiguous { .. })
    ));
    assert_eq!(
        resolve(&runs, "#9").unwrap_err(),
        TargetError::NotFound("#9".into())
    );
    // Another session's child is not in this scope.
    assert!(resolve(&runs, "beta").is_err());
    assert_eq!(resolve(&runs, " ").unwrap_err(), TargetError::Empty);
    assert!(matches!(
        alive_one(&runs, "gamma"),
        Err(TargetError::Ended { status, .. }) if status == "failed"
    ));
    assert_eq!(run_id(alive_one(&runs, "alpha").unwrap()), "run-c1");
}

#[test]
fn the_descendants_of_a_session_are_its_alive_children_and_theirs() {
    let all = family();
    let found: Vec<&str> = descendants(&all, "agent:main:main")
        .into_iter()
        .map(run_id)
        .collect();
    assert_eq!(found, ["run-c1", "run-g1"]);
    let found: Vec<&str> = descendants(&all, "c1").into_iter().map(run_id).collect();
    assert_eq!(found, ["run-g1"]);
    assert!(descendants(&all, "g1").is_empty());
}

#[test]
fn a_log_without_tools_drops_calls_and_their_results() {
    let call =
        serde_json::json!({"role": "assistant", "content": [{"type": "toolCall", "name": "exec"}]});
    let mixed = serde_json::json!({"role": "assistant", "content": [{"type": "text", "text": "ok"}, {"type": "toolCall", "name": "exec"}]});
    let result =
        serde_json::json!({"role": "toolResult", "content": [{"type": "text", "text": "out"}]});
    assert_eq!(without_tools(call), None);
    assert_eq!(without_tools(result), None);
    assert_eq!(
        without_tools(mixed).unwrap()["content"],
        serde_json::json!([{"type": "text", "text": "ok"}])
    );
}

#[test]
fn an_id_prefix_of_digits_names_its_run_unless_it_is_a_listed_number() {
    let mut l = Ledger::open_in_memory().unwrap();
    let mut digits = run(
        &mut l,
        "agent:main:main",
        "c9",
        "nine",
        NOW,
        Status::Running,
    );
    digits.run_id = Some("43142444-5b1c-4c7e-9d4e-0a1b2c3d4e5f".to_string());
    let runs = select(vec![digits], Some("agent:main:main"), NOW);
    let found = resolve(&runs, "43142444").unwrap();
    assert_eq!(run_id(found[0]), "43142444-5b1c-4c7e-9d4e-0a1b2c3d4e5f");
    // `#` always means the list's number; a short number too.
    assert_eq!(run_id(resolve(&runs, "1").unwrap()[0]), run_id(found[0]));
    assert_eq!(
        resolve(&runs, "#43142444").unwrap_err(),
        TargetError::NotFound("#43142444".into())
    );
    assert_eq!(
        resolve(&runs, "7").unwrap_err(),
        TargetError::NotFound("7".into())
    );
}
