//! `approvals` (our extension): the frozen approver policy of a run, whether
//! its file still matches the chained checksum, and every approve/deny
//! decision. Read-only; `--format table` renders the same data for people.

use crate::store::root::StateRoot;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Map, Value};

// Every cell is inert (trust-model §2 promise 11): the policy and the
// decisions are text other writers chose (an `approver_key` comment, a
// `by`), shown as `status` and `log` show receipt text.
use super::Success;
use super::table::{cell, inert, text_or_dash, yes_no};
use crate::commands::{self, FlowResult};
use crate::coordinator::breach::Breach;
use crate::store::discovery::DiscoveryEnv;
use serde::Deserialize;

#[derive(Debug, Subcommand, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalCommands {
    Approvals(ApprovalsArgs),
    ApprovalStatement(StatementArgs),
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct StatementArgs {
    #[arg(long = "run-id", required = true)]
    pub run_id: String,
    /// The new file to write the statement to (never replaced).
    #[arg(long, required = true)]
    pub out: std::path::PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    Json,
    Table,
}

impl Format {
    /// The default of `--format`, for a call that names none.
    fn json() -> Format {
        Format::Json
    }
}

#[derive(Debug, Args, serde::Deserialize)]
pub struct ApprovalsArgs {
    #[arg(long = "run-id", required = true)]
    pub run_id: String,
    #[arg(long, value_enum, default_value = "json")]
    #[serde(default = "Format::json")]
    pub format: Format,
}

pub fn dispatch(
    command: ApprovalCommands,
    root: &StateRoot,
    env: &DiscoveryEnv,
) -> FlowResult<Success> {
    let args = match command {
        ApprovalCommands::Approvals(args) => args,
        ApprovalCommands::ApprovalStatement(args) => {
            let data = commands::approval::approval_statement(root, env, &args.run_id, &args.out)?;
            return Ok(Success::data("approval-statement", data));
        }
    };
    let data = commands::approval::approvals(root, &args.run_id)?;
    Ok(Success::tabled("approvals", data, table))
}

/// Whether `approvals` prints its table (`--format table`; its default is
/// the JSON envelope, on a terminal too).
pub fn wants_table(args: &ApprovalsArgs) -> bool {
    args.format == Format::Table
}

/// What the `approvals` table reads of its answer: the answer's map is
/// read once into this model, so a key the table needs is named once.
#[derive(Debug, serde::Deserialize)]
struct ApprovalsView {
    run_id: String,
    /// The frozen policy as its canonical JSON: shown key by key, as it
    /// was recorded (free JSON to the table).
    policy: Option<Map<String, Value>>,
    policy_checksum: Option<String>,
    policy_file_matches: Option<bool>,
    #[serde(default)]
    policy_problem: Option<String>,
    #[serde(default)]
    identity_proof: Option<String>,
    decisions: Vec<DecisionView>,
    #[serde(default)]
    breaches: Vec<Breach>,
}

/// One decision row of the table.
#[derive(Debug, serde::Deserialize)]
struct DecisionView {
    decision: String,
    by: Option<String>,
    source: Option<String>,
    at: String,
    sequence: u64,
    #[serde(default)]
    proof: Option<String>,
    #[serde(default)]
    key: Option<String>,
    /// What the `approval_gate` breach at this decision found.
    #[serde(default)]
    breach: Option<String>,
}

/// The plain-text rendering of an `approvals` result (`--format table`).
pub fn table(data: &Map<String, Value>, colour: bool) -> String {
    match ApprovalsView::deserialize(data) {
        Ok(view) => view_table(&view, colour),
        // Our own answer always reads; if it ever did not, the table says
        // so rather than showing blanks.
        Err(error) => format!(
            "approvals: the table cannot be drawn ({error}); see --format json (a bug in bluetape-flow)"
        ),
    }
}

fn view_table(view: &ApprovalsView, _colour: bool) -> String {
    let mut lines = vec![format!(
        "run                           {}",
        inert(&view.run_id)
    )];
    let checksum = || text_or_dash(view.policy_checksum.as_deref());
    match (&view.policy, &view.policy_checksum) {
        (Some(policy), _) => {
            lines.push(format!("policy checksum               {}", checksum()));
            lines.push(format!(
                "policy file matches           {}",
                view.policy_file_matches.map_or_else(|| "-".into(), yes_no)
            ));
            for (key, value) in policy {
                lines.push(format!("  {:<28}{}", inert(key), cell(value)));
            }
        }
        (None, None) => {
            lines.push("policy                        none (the owner alone approves)".into());
        }
        (None, Some(_)) => {
            lines.push(format!("policy checksum               {}", checksum()));
            lines.push("policy file matches           NO (approvals are refused)".into());
            lines.push(format!(
                "  problem                     {}",
                text_or_dash(view.policy_problem.as_deref())
            ));
        }
    }
    if let Some(proof) = &view.identity_proof {
        lines.push(format!("identity                      {}", inert(proof)));
    }
    if view.decisions.is_empty() {
        lines.push("decisions                     none".into());
    } else {
        lines.push(format!(
            "{:<9}{:<10}{:<24}{:<12}{:<28}PROOF",
            "SEQUENCE", "DECISION", "BY", "SOURCE", "AT"
        ));
        for d in &view.decisions {
            let decision = match d.breach {
                Some(_) => "BREACH".to_string(),
                None => inert(&d.decision),
            };
            // Who decided is what the writer asserts, unless a verified
            // signature proves it (trust model §2 promise 4).
            let proof = match (d.proof.as_deref(), &d.key) {
                (Some("signed"), Some(key)) => format!("signed by key {key}"),
                (Some("signed"), None) => "signed".to_string(),
                _ => "asserted by its writer".to_string(),
            };
            lines.push(format!(
                "{:<9}{:<10}{:<24}{:<12}{:<28}{proof}",
                d.sequence,
                decision,
                text_or_dash(d.by.as_deref()),
                text_or_dash(d.source.as_deref()),
                inert(&d.at)
            ));
        }
    }
    for b in &view.breaches {
        lines.push(format!(
            "BREACH at sequence {} ({}): {}",
            b.sequence,
            inert(&b.rule),
            inert(&b.found)
        ));
    }
    if !view.breaches.is_empty() {
        lines.push(format!("hint: {}", crate::coordinator::breach::HINT));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_table_shows_the_policy_and_the_decisions_when_asked_for() {
        let args = |format| ApprovalsArgs {
            run_id: "r1".into(),
            format,
        };
        assert!(!wants_table(&args(Format::Json)));
        assert!(wants_table(&args(Format::Table)));
        let data = json!({
            "run_id": "r1",
            "policy": {"required_approver": "alice", "require_different_approver": true},
            "policy_checksum": "ab",
            "policy_file_matches": true,
            "decisions": [{"decision": "approved", "by": "alice", "source": "env",
                           "at": "2026-07-14T01:00:00Z", "sequence": 2}],
        });
        let text = table(data.as_object().unwrap(), false);
        assert!(
            text.contains("  required_approver           alice"),
            "{text}"
        );
        assert!(text.contains("policy file matches           yes"), "{text}");
        assert!(text.contains("2        approved  alice"), "{text}");
        let none = json!({"run_id": "r1", "policy": null, "policy_checksum": null,
                          "policy_file_matches": null, "decisions": []});
        let text = table(none.as_object().unwrap(), false);
        assert!(text.contains("none (the owner alone approves)"), "{text}");
    }
}
