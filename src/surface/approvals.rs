//! `approvals` (our extension): the frozen approver policy of a run, whether
//! its file still matches the chained checksum, and every approve/deny
//! decision. Read-only; `--format table` renders the same data for people.

use crate::store::root::StateRoot;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Map, Value};

// Every cell is inert (trust-model §2 promise 11): the policy and the
// decisions are text other writers chose (an `approver_key` comment, a
// `by`), shown as `status` and `log` show receipt text.
use super::envelope::data;
use super::table::{cell, inert};
use crate::commands::{self, FlowResult};
use crate::store::discovery::DiscoveryEnv;

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
) -> FlowResult<(&'static str, Map<String, Value>)> {
    let args = match command {
        ApprovalCommands::Approvals(args) => args,
        ApprovalCommands::ApprovalStatement(args) => {
            let answer =
                commands::approval::approval_statement(root, env, &args.run_id, &args.out)?;
            return Ok(("approval-statement", data(&answer)));
        }
    };
    let answer = commands::approval::approvals(root, &args.run_id)?;
    Ok(("approvals", data(&answer)))
}

/// Whether `approvals` prints its table (`--format table`; its default is
/// the JSON envelope, on a terminal too).
pub fn wants_table(args: &ApprovalsArgs) -> bool {
    args.format == Format::Table
}

/// The plain-text rendering of an `approvals` result (`--format table`).
pub fn table(data: &Map<String, Value>, _colour: bool) -> String {
    let get = |key: &str| data.get(key).unwrap_or(&Value::Null);
    let mut lines = vec![format!(
        "run                           {}",
        cell(get("run_id"))
    )];
    match get("policy") {
        Value::Object(policy) => {
            lines.push(format!(
                "policy checksum               {}",
                cell(get("policy_checksum"))
            ));
            lines.push(format!(
                "policy file matches           {}",
                cell(get("policy_file_matches"))
            ));
            for (key, value) in policy {
                lines.push(format!("  {:<28}{}", inert(key), cell(value)));
            }
        }
        _ if get("policy_checksum").is_null() => {
            lines.push("policy                        none (the owner alone approves)".into());
        }
        _ => {
            lines.push(format!(
                "policy checksum               {}",
                cell(get("policy_checksum"))
            ));
            lines.push("policy file matches           NO (approvals are refused)".into());
            lines.push(format!(
                "  problem                     {}",
                cell(get("policy_problem"))
            ));
        }
    }
    if let Value::String(proof) = get("identity_proof") {
        lines.push(format!("identity                      {}", inert(proof)));
    }
    let decisions = get("decisions").as_array().cloned().unwrap_or_default();
    if decisions.is_empty() {
        lines.push("decisions                     none".into());
    } else {
        lines.push(format!(
            "{:<9}{:<10}{:<24}{:<12}{:<28}PROOF",
            "SEQUENCE", "DECISION", "BY", "SOURCE", "AT"
        ));
        for d in &decisions {
            let field = |k: &str| cell(d.get(k).unwrap_or(&Value::Null));
            let decision = match d.get("breach") {
                Some(_) => "BREACH".to_string(),
                None => field("decision"),
            };
            // Who decided is what the writer asserts, unless a verified
            // signature proves it (trust model §2 promise 4).
            let proof = match (field("proof").as_str(), d.get("key")) {
                ("signed", Some(Value::String(key))) => format!("signed by key {key}"),
                ("signed", _) => "signed".to_string(),
                _ => "asserted by its writer".to_string(),
            };
            lines.push(format!(
                "{:<9}{:<10}{:<24}{:<12}{:<28}{proof}",
                field("sequence"),
                decision,
                field("by"),
                field("source"),
                field("at")
            ));
        }
    }
    let breaches = super::table::breaches_of(data);
    for b in &breaches {
        lines.push(format!(
            "BREACH at sequence {} ({}): {}",
            b.sequence,
            inert(&b.rule),
            inert(&b.found)
        ));
    }
    if !breaches.is_empty() {
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
