//! `approvals` (our extension): the frozen approver policy of a run, whether
//! its file still matches the chained checksum, and every approve/deny
//! decision. Read-only; `--format table` renders the same data for people.

use crate::store::root::StateRoot;
use clap::{Args, Subcommand, ValueEnum};

// Every cell is inert (trust-model §2 promise 11): the policy and the
// decisions are text other writers chose (an `approver_key` comment, a
// `by`), shown as `status` and `log` show receipt text.
use super::Success;
use super::table::{cell, inert, text_or_dash, yes_no};
use crate::commands::approval::ApprovalsAnswer;
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
) -> FlowResult<Success> {
    let args = match command {
        ApprovalCommands::Approvals(args) => args,
        ApprovalCommands::ApprovalStatement(args) => {
            let answer =
                commands::approval::approval_statement(root, env, &args.run_id, &args.out)?;
            return Ok(Success::of("approval-statement", &answer));
        }
    };
    let answer = commands::approval::approvals(root, &args.run_id)?;
    Ok(Success::tabled("approvals", answer, table))
}

/// Whether `approvals` prints its table (`--format table`; its default is
/// the JSON envelope, on a terminal too).
pub fn wants_table(args: &ApprovalsArgs) -> bool {
    args.format == Format::Table
}

/// The plain-text rendering of an `approvals` result (`--format table`).
pub fn table(view: &ApprovalsAnswer, _colour: bool) -> String {
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
            // Key by key, as the envelope shows the frozen policy.
            for (key, value) in super::envelope::data(policy) {
                lines.push(format!("  {:<28}{}", inert(&key), cell(&value)));
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
    if let Some(proof) = view.identity_proof {
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
                None => inert(d.decision.decision),
            };
            // Who decided is what the writer asserts, unless a verified
            // signature proves it (trust model §2 promise 4).
            let proof = match (d.proof, &d.key) {
                ("signed", Some(key)) => format!("signed by key {key}"),
                ("signed", None) => "signed".to_string(),
                _ => "asserted by its writer".to_string(),
            };
            lines.push(format!(
                "{:<9}{:<10}{:<24}{:<12}{:<28}{proof}",
                d.decision.sequence,
                decision,
                text_or_dash(d.decision.by.as_deref()),
                text_or_dash(d.decision.source.as_deref()),
                inert(&d.decision.at)
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

    #[test]
    fn the_table_shows_the_policy_and_the_decisions_when_asked_for() {
        let args = |format| ApprovalsArgs {
            run_id: "r1".into(),
            format,
        };
        assert!(!wants_table(&args(Format::Json)));
        assert!(wants_table(&args(Format::Table)));
        let policy = crate::coordinator::approval::ApprovalPolicy {
            required_approver: Some("alice".into()),
            require_different_approver: true,
            initiated_by: None,
            approver_fingerprint: None,
            approver_key: None,
            expires_after_s: None,
        };
        let decision = crate::coordinator::approval::Decision {
            decision: "approved",
            by: Some("alice".into()),
            source: Some("env".into()),
            at: "2026-07-14T01:00:00Z".into(),
            sequence: 2,
        };
        let answer = ApprovalsAnswer {
            run_id: "r1".into(),
            policy_checksum: Some("ab".into()),
            policy: Some(policy),
            policy_file_matches: Some(true),
            policy_problem: None,
            identity_proof: None,
            decisions: vec![commands::approval::ShownDecision {
                decision,
                proof: "asserted",
                key: None,
                breach: None,
            }],
            breaches: vec![],
        };
        let text = table(&answer, false);
        assert!(
            text.contains("  required_approver           alice"),
            "{text}"
        );
        assert!(text.contains("policy file matches           yes"), "{text}");
        assert!(text.contains("2        approved  alice"), "{text}");
        let none = ApprovalsAnswer {
            policy_checksum: None,
            policy: None,
            policy_file_matches: None,
            decisions: vec![],
            ..answer
        };
        let text = table(&none, false);
        assert!(text.contains("none (the owner alone approves)"), "{text}");
    }
}
