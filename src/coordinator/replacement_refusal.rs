//! Why a replacement step is refused for the lanes it names
//! (reference-coordinator §8): a conflict (exit 5) with the reference's
//! message, whose `fields` (the lanes, their states, the reservation) and
//! hint are functions of the reason.

use serde_json::json;

use super::decide::{ConflictReason, Teaching};
use super::state::LaneState;
use crate::receipt::vocab::EventType;

/// Which lineage command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineageCommand {
    /// `replacement-close`: the original takes the replacement's terminal state.
    Close,
    /// `replacement-repair`: recreate the reserved child of an incomplete
    /// reservation.
    Repair,
    /// `replacement-block`: end an incomplete reservation as blocked.
    Block,
}

impl LineageCommand {
    /// The reference's message when the lane is not `replaced` as this
    /// command needs.
    fn not_replaced(self) -> &'static str {
        match self {
            LineageCommand::Close => "original lane is not awaiting lineage close",
            LineageCommand::Repair => "lane has no repairable replacement",
            LineageCommand::Block => "lane has no incomplete replacement",
        }
    }

    /// The reference's message when the lane named is not the reserved one.
    fn not_reserved(self) -> &'static str {
        match self {
            LineageCommand::Close => "replacement lane does not match reservation",
            LineageCommand::Repair | LineageCommand::Block => {
                "replacement reservation does not match"
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplacementRefusal {
    /// `lane-reassign` of a lane that is not `recovering`.
    #[error("replacement requires a recovering lane")]
    NotRecovering { lane_id: String, state: LaneState },
    /// `lane-reassign` of a recovering lane whose last event is not the
    /// interrupt.
    #[error("replacement requires interrupt evidence")]
    NotInterrupted {
        lane_id: String,
        last_event: EventType,
    },
    /// The lane was replaced as often as the run's manifest allows.
    #[error("replacement limit reached")]
    LimitReached { lane_id: String, max: u64 },
    /// A lineage step on a lane that is not `replaced` (`None`: no such lane).
    #[error("{}", .command.not_replaced())]
    NotReplaced {
        command: LineageCommand,
        lane_id: String,
        state: Option<LaneState>,
    },
    /// The replacement lane named is not the one the original reserved.
    #[error("{}", .command.not_reserved())]
    NotReserved {
        command: LineageCommand,
        lane_id: String,
        given: String,
        reserved: Option<String>,
    },
    /// `replacement-close` before the replacement finished (`None`: the
    /// replacement lane was never made).
    #[error("replacement lane is not terminal")]
    NotTerminal {
        replacement_lane_id: String,
        state: Option<LaneState>,
    },
    /// `replacement-repair` or `-block` of a replacement that exists.
    #[error("replacement lane already exists")]
    ReplacementExists {
        replacement_lane_id: String,
        state: LaneState,
    },
    /// `replacement-repair` of a reservation recorded without the exact
    /// child proof.
    #[error("legacy reservation lacks exact child proof; block it explicitly")]
    NoChildProof {
        lane_id: String,
        replacement_lane_id: String,
    },
    /// `replacement-repair` of a reservation whose child agent is the
    /// interrupted agent itself.
    #[error("reservation does not fence the interrupted agent; block it explicitly")]
    Unfenced {
        lane_id: String,
        replacement_lane_id: String,
        agent_id: String,
    },
    /// `replacement-block` of a reservation that is not incomplete.
    #[error("replacement reservation is complete")]
    Complete {
        lane_id: String,
        replacement_lane_id: String,
    },
    /// `resume` while `lanes` were replaced by a replacement never made.
    #[error("incomplete replacement must be repaired or blocked before owner transfer")]
    BlocksTransfer { lanes: Vec<String> },
}

/// The command that ends an unrepairable reservation, as a hint spells it.
fn block_command(lane_id: &str, replacement_lane_id: &str) -> String {
    format!(
        "bluetape-flow replacement-block --run-id {{run_id}} --owner-file {{owner_file}} --lane-id {lane_id} --replacement-lane-id {replacement_lane_id} --at TIME --evidence FILE"
    )
}

impl ConflictReason for ReplacementRefusal {
    /// Its `fields` and hint; `{run_id}`-style placeholders are filled by
    /// the envelope.
    fn teaching(&self) -> Teaching {
        let state = |s: &Option<LaneState>| s.map(LaneState::as_str);
        let (fields, hint) = match self {
            Self::NotRecovering { lane_id, state } => (
                json!({"lane_id": lane_id, "lane_state": state.as_str()}),
                format!(
                    "lane {lane_id} is {}: lane-reassign replaces a lane the main session interrupted (it is then recovering): record interrupt-result first when liveness-check says interrupt",
                    state.as_str()
                ),
            ),
            Self::NotInterrupted {
                lane_id,
                last_event,
            } => (
                json!({"lane_id": lane_id, "last_event_type": last_event.as_str()}),
                format!(
                    "lane {lane_id}'s last event is {}, not agent_interrupted: lane-reassign follows interrupt-result; see bluetape-flow status --run-id {{run_id}}",
                    last_event.as_str()
                ),
            ),
            Self::LimitReached { lane_id, max } => (
                json!({"lane_id": lane_id, "max_replacements": max}),
                format!(
                    "retrying cannot help: lane {lane_id}'s lineage was replaced {max} time(s), the run manifest's limit; the main session takes the lane's work over itself (liveness-check answers main_takeover)"
                ),
            ),
            Self::NotReplaced {
                lane_id, state: s, ..
            } => (
                json!({"lane_id": lane_id, "lane_state": state(s)}),
                format!(
                    "lane {lane_id} is {}, not replaced: only a lane that lane-reassign replaced has a replacement to close, repair or block; see bluetape-flow resume-check --run-id {{run_id}}",
                    state(s).unwrap_or("no lane of this run")
                ),
            ),
            Self::NotReserved {
                lane_id,
                given,
                reserved,
                ..
            } => (
                json!({"lane_id": lane_id, "replacement_lane_id": given, "reserved_lane_id": reserved}),
                match reserved {
                    Some(reserved) => format!(
                        "lane {lane_id} reserved {reserved} as its replacement, not {given}: pass --replacement-lane-id {reserved}"
                    ),
                    None => format!(
                        "lane {lane_id} records no reserved replacement; see bluetape-flow resume-check --run-id {{run_id}}"
                    ),
                },
            ),
            Self::NotTerminal {
                replacement_lane_id,
                state: s,
            } => (
                json!({"replacement_lane_id": replacement_lane_id, "replacement_lane_state": state(s)}),
                match s {
                    Some(s) => format!(
                        "replacement-close waits until lane {replacement_lane_id} has finished (it is {}): complete, fail or cancel it first",
                        s.as_str()
                    ),
                    None => format!(
                        "the replacement lane {replacement_lane_id} was never made: replacement-repair makes it, replacement-block gives the reservation up"
                    ),
                },
            ),
            Self::ReplacementExists {
                replacement_lane_id,
                state,
            } => (
                json!({"replacement_lane_id": replacement_lane_id, "replacement_lane_state": state.as_str()}),
                format!(
                    "retrying cannot help: lane {replacement_lane_id} exists already ({}), so the reservation is not incomplete; once it has finished, close the lineage with replacement-close",
                    state.as_str()
                ),
            ),
            Self::NoChildProof {
                lane_id,
                replacement_lane_id,
            } => (
                json!({"lane_id": lane_id, "replacement_lane_id": replacement_lane_id}),
                format!(
                    "the reservation was recorded without the exact child proof, so it cannot be made again; end it: {}",
                    block_command(lane_id, replacement_lane_id)
                ),
            ),
            Self::Unfenced {
                lane_id,
                replacement_lane_id,
                agent_id,
            } => (
                json!({"lane_id": lane_id, "replacement_lane_id": replacement_lane_id, "agent_id": agent_id}),
                format!(
                    "the reserved replacement would go back to {agent_id}, the agent the replacement fenced off; end the reservation instead: {}",
                    block_command(lane_id, replacement_lane_id)
                ),
            ),
            Self::Complete {
                lane_id,
                replacement_lane_id,
            } => (
                json!({"lane_id": lane_id, "replacement_lane_id": replacement_lane_id}),
                format!(
                    "retrying cannot help: lane {lane_id}'s reservation of {replacement_lane_id} is not incomplete, there is nothing to block; see bluetape-flow resume-check --run-id {{run_id}}"
                ),
            ),
            Self::BlocksTransfer { lanes } => (
                json!({"incomplete_replacements": lanes}),
                format!(
                    "lane(s) {} were replaced by a lane never made: make it with replacement-repair or give it up with replacement-block (bluetape-flow resume-check --run-id {{run_id}} shows each), then resume",
                    lanes.join(", ")
                ),
            ),
        };
        Teaching::reason(fields, hint)
    }
}
