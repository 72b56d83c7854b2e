//! The vocabulary of a receipt: event types, run, lane and coverage states
//! and report kinds, as enums. Text becomes one of these exactly once, where
//! a receipt line or an input is decoded ([`parse`](EventType::parse)); every
//! rule above matches on the enum, never on the string. Each enum writes the
//! same text it was parsed from ([`as_str`](EventType::as_str), serde), so
//! the bytes on disk do not change.

use std::fmt;

use super::rules::Family;

/// One closed set of names: the enum, its text, its parser, serde as that
/// text, and comparison with text (for tests and for the few places that
/// hold a name they did not parse).
macro_rules! vocabulary {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every name, in declaration order.
            pub const ALL: [$name; [$($text,)+].len()] = [$($name::$variant,)+];

            /// The name as it stands in a receipt or an input.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// The one parser: `None` for a name outside the set.
            pub fn parse(text: &str) -> Option<$name> {
                match text {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.as_str()
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                $name::parse(&text).ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        concat!("unknown ", stringify!($name), " {:?}"),
                        text
                    ))
                })
            }
        }
    };
}

/// The approval policy's file name inside `runs/<id>/`: where the store
/// keeps it and the `path` its binding item on `run_created` names.
pub const POLICY_FILE: &str = "approval-policy.json";

vocabulary! {
    /// The 41 receipt event types of manifest 1.1 (the first 25 are 1.0's).
    EventType {
        RunCreated = "run_created",
        PlanApproved = "plan_approved",
        RunStarted = "run_started",
        TopologyRegistered = "topology_registered",
        LaneCreated = "lane_created",
        LaneStarted = "lane_started",
        StartupAck = "startup_ack",
        HeartbeatObserved = "heartbeat_observed",
        LeaseRenewed = "lease_renewed",
        StallSuspected = "stall_suspected",
        ProbeSent = "probe_sent",
        ProbeAcknowledged = "probe_acknowledged",
        AgentInterrupted = "agent_interrupted",
        LaneReassigned = "lane_reassigned",
        LaneRecovered = "lane_recovered",
        EvidenceAttached = "evidence_attached",
        CheckPassed = "check_passed",
        CheckFailed = "check_failed",
        LaneCompleted = "lane_completed",
        LaneFailed = "lane_failed",
        RunCompleted = "run_completed",
        RunBlocked = "run_blocked",
        CandidateProposed = "candidate_proposed",
        CandidateValidated = "candidate_validated",
        CandidateRejected = "candidate_rejected",
        RunRecoveryStarted = "run_recovery_started",
        RunRecoveryFinished = "run_recovery_finished",
        RunFailed = "run_failed",
        RunCancelled = "run_cancelled",
        RunResumed = "run_resumed",
        TopologyComponentRemoved = "topology_component_removed",
        StallCleared = "stall_cleared",
        ReplacementRepaired = "replacement_repaired",
        ReplacementBlocked = "replacement_blocked",
        ReplacementLineageClosed = "replacement_lineage_closed",
        LaneBlocked = "lane_blocked",
        LaneCancelled = "lane_cancelled",
        HandoffRecorded = "handoff_recorded",
        LiveReportRecorded = "live_report_recorded",
        MainVerification = "main_verification",
        TransactionCommitted = "transaction_committed",
    }
}

/// How many event types manifest 1.0 knows (the first ones of
/// [`EventType::ALL`]).
const EVENT_TYPES_1_0: usize = 25;

impl EventType {
    /// The event types of a manifest family, in manifest order.
    pub fn of_family(family: Family) -> &'static [EventType] {
        match family {
            Family::V1_0 => &EventType::ALL[..EVENT_TYPES_1_0],
            Family::V1_1 => &EventType::ALL,
        }
    }

    /// Whether a run of `family` may record this event type.
    pub fn in_family(self, family: Family) -> bool {
        EventType::of_family(family).contains(&self)
    }

    /// The type of a decoded receipt event (or transaction intent): the
    /// parser applied to its `event_type` field; `None` when it is absent or
    /// not one of ours.
    pub fn of(event: &serde_json::Map<String, serde_json::Value>) -> Option<EventType> {
        event
            .get("event_type")
            .and_then(serde_json::Value::as_str)
            .and_then(EventType::parse)
    }

    /// Events whose evidence is liveness evidence (never completion
    /// evidence).
    pub fn is_liveness(self) -> bool {
        use EventType::*;
        matches!(
            self,
            HeartbeatObserved
                | LeaseRenewed
                | StallSuspected
                | LaneRecovered
                | ProbeSent
                | ProbeAcknowledged
                | AgentInterrupted
        )
    }

    /// Events after which replay recomputes `incomplete_replacements`.
    pub fn touches_lineage(self) -> bool {
        use EventType::*;
        matches!(
            self,
            LaneCreated
                | LaneReassigned
                | ReplacementRepaired
                | ReplacementBlocked
                | ReplacementLineageClosed
        )
    }
}

vocabulary! {
    /// Run states of the coordinator (manifest 1.1 `run_states`).
    RunState {
        Planned = "planned",
        Approved = "approved",
        Running = "running",
        Recovering = "recovering",
        Completed = "completed",
        Failed = "failed",
        Blocked = "blocked",
        Cancelled = "cancelled",
    }
}

impl RunState {
    /// Terminal runs accept no further mutation (except the live report on a
    /// completed run).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunState::Completed | RunState::Failed | RunState::Blocked | RunState::Cancelled
        )
    }
}

vocabulary! {
    /// Lane states of the coordinator (manifest 1.1 `lane_states`).
    LaneState {
        Pending = "pending",
        Starting = "starting",
        Running = "running",
        SuspectedStall = "suspected_stall",
        Recovering = "recovering",
        Replaced = "replaced",
        Completed = "completed",
        Failed = "failed",
        Blocked = "blocked",
        Cancelled = "cancelled",
    }
}

impl LaneState {
    /// completed, failed, blocked, cancelled. `replaced` is *not* terminal:
    /// the original waits for its lineage to be closed.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            LaneState::Completed | LaneState::Failed | LaneState::Blocked | LaneState::Cancelled
        )
    }
}

vocabulary! {
    /// Coverage of a topology component.
    CoverageState {
        Missing = "missing",
        Partial = "partial",
        Covered = "covered",
    }
}

vocabulary! {
    /// The two bound report kinds (`report_kind` in the receipt).
    ReportKind {
        /// `handoff-create`: a fresh-session handoff of a live run.
        Handoff = "fresh_session_handoff",
        /// `live-report-create`: the live-apply report of a completed run.
        Live = "live_apply",
    }
}

impl ReportKind {
    /// The event that binds a report of this kind.
    pub fn event_type(self) -> EventType {
        match self {
            ReportKind::Handoff => EventType::HandoffRecorded,
            ReportKind::Live => EventType::LiveReportRecorded,
        }
    }
}

/// The state an event moves a run or a lane to (`from_state`/`to_state`):
/// which of the two is said by the event, so the text alone is kept typed
/// by its family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StateName {
    Run(RunState),
    Lane(LaneState),
}

impl StateName {
    pub fn as_str(self) -> &'static str {
        match self {
            StateName::Run(state) => state.as_str(),
            StateName::Lane(state) => state.as_str(),
        }
    }
}

impl From<RunState> for StateName {
    fn from(state: RunState) -> Self {
        StateName::Run(state)
    }
}

impl From<LaneState> for StateName {
    fn from(state: LaneState) -> Self {
        StateName::Lane(state)
    }
}

impl fmt::Display for StateName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for StateName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl serde::Serialize for StateName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_round_trips_through_the_one_parser() {
        for t in EventType::ALL {
            assert_eq!(EventType::parse(t.as_str()), Some(t));
        }
        for s in RunState::ALL {
            assert_eq!(RunState::parse(s.as_str()), Some(s));
        }
        for s in LaneState::ALL {
            assert_eq!(LaneState::parse(s.as_str()), Some(s));
        }
        assert_eq!(EventType::ALL.len(), 41);
        assert_eq!(EventType::of_family(Family::V1_0).len(), 25);
        assert_eq!(EventType::parse("lane_started "), None);
        assert_eq!(
            serde_json::to_string(&EventType::RunResumed).unwrap(),
            "\"run_resumed\""
        );
        assert!(serde_json::from_str::<LaneState>("\"nope\"").is_err());
    }
}
