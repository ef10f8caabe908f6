//! Snapshots of the canonical rows a few real runs become, one per source format. Long texts
//! are cut to 80 characters so the snapshots stay readable; the payload column is left out.

mod common;

use common::*;
use traceaudit::model::vocab::source_family;
use traceaudit::model::Run;
use traceaudit::read::read_path;
use traceaudit::Format;

fn cut(s: &Option<String>) -> String {
    match s {
        None => "-".into(),
        Some(t) => {
            let one_line = t.replace('\n', "\\n");
            if one_line.chars().count() > 80 {
                format!("{}…", one_line.chars().take(80).collect::<String>())
            } else {
                one_line
            }
        }
    }
}

fn render(run: &Run) -> String {
    let mut out = format!(
        "run {} conversation {} turn {} format {} agent {} model {}\nuser: {}\nanswer: {}\n",
        run.run_id,
        run.conversation_id,
        run.turn,
        run.format,
        cut(&run.agent),
        cut(&run.model),
        cut(&run.user_message),
        cut(&run.answer)
    );
    for e in &run.events {
        out.push_str(&format!(
            "{:>3} {:<10} {:<9} {:<22} tool={} call={} args={} err={} flags={} it={} text={}\n",
            e.seq,
            e.kind().as_str(),
            e.role.map(|r| r.as_str()).unwrap_or("-"),
            e.source_type
                .as_deref()
                .unwrap_or("-")
                .trim_start_matches("agentfootprint."),
            e.tool_name.as_deref().unwrap_or("-"),
            e.call_id.as_deref().unwrap_or("-"),
            cut(&e.arguments),
            e.error,
            e.flags,
            e.iteration.map(|i| i.to_string()).unwrap_or("-".into()),
            cut(&e.text)
        ));
    }
    out
}

#[test]
fn agentfootprint_run_rows() {
    let read = read_path(
        &testdata("agentfootprint/ndjson/a_repeated_identical_call.ndjson"),
        None,
    )
    .unwrap();
    let run = &read.conversations[0].0.runs[0];
    // Tokens and context bookkeeping make the run long; keep the rows the checks read.
    let mut kept = run.clone();
    kept.events.retain(|e| {
        !matches!(
            e.source_type.as_deref(),
            Some("agentfootprint.stream.token")
                | Some("agentfootprint.context.injected")
                | Some("agentfootprint.context.slot_composed")
                | Some("agentfootprint.context.evaluated")
        )
    });
    insta::assert_snapshot!(render(&kept));
}

#[test]
fn tau_bench_run_rows() {
    let read = read_path(&testdata("tau-bench/gpt-4o-airline.first3.json"), None).unwrap();
    let conv = &read.conversations[0].0;
    insta::assert_snapshot!(conv.runs[..3].iter().map(render).collect::<String>());
}

/// The corpus `source` the model names for a stored format is the family the format declares,
/// for every format the ingest writes; a name no format has is its own source.
#[test]
fn every_format_name_is_stored_under_its_family() {
    for format in Format::ALL {
        assert_eq!(
            source_family(format.name()),
            format.family(),
            "{}",
            format.name()
        );
    }
    assert_eq!(source_family("not-a-format"), "not-a-format");
}
