//! The run and lane state machines: one table per transition family, read
//! by replay (which accepts what the receipt may hold), by the lifecycle
//! decisions (which emit a part of it) and by the "simple" run cache of
//! Phase 1 runs (which only needs the targets). Pure.

use crate::receipt::vocab::{EventType, LaneState, RunState};

/// One edge of a state machine: the states an event may leave and the
/// state it enters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge<From: 'static, To> {
    pub from: &'static [From],
    pub to: To,
}

/// A run edge: `None` as a source is the empty run.
pub type RunEdge = Edge<Option<RunState>, RunState>;

/// A lane edge.
pub type LaneEdge = Edge<LaneState, LaneState>;

/// The run state machine. `None` as a source is the empty run before its
/// first event (only `run_created` leaves it).
pub fn run_edge(event_type: EventType) -> Option<RunEdge> {
    use EventType as E;
    use RunState::*;
    let (from, to): (&'static [Option<RunState>], RunState) = match event_type {
        E::RunCreated => (&[None, Some(Planned)], Planned),
        E::PlanApproved => (&[Some(Planned)], Approved),
        E::RunStarted => (&[Some(Approved)], Running),
        E::RunRecoveryStarted => (&[Some(Running)], Recovering),
        E::RunRecoveryFinished => (&[Some(Recovering)], Running),
        E::RunFailed => (&[Some(Running), Some(Recovering)], Failed),
        E::RunBlocked => (&[Some(Running), Some(Recovering)], Blocked),
        // decisions.md 6: cancel is allowed from planned and approved too.
        E::RunCancelled => (
            &[
                Some(Planned),
                Some(Approved),
                Some(Running),
                Some(Recovering),
            ],
            Cancelled,
        ),
        E::RunCompleted => (&[Some(Running)], Completed),
        _ => return None,
    };
    Some(Edge { from, to })
}

/// The lane state machine as replay accepts it; the lane commands emit the
/// part of it that does not leave `replaced` (a replaced lane is moved on
/// by the replacement commands).
pub fn lane_edge(event_type: EventType) -> Option<LaneEdge> {
    use EventType as E;
    use LaneState::*;
    const FAILABLE: &[LaneState] = &[Starting, Running, SuspectedStall, Recovering, Replaced];
    const CANCELLABLE: &[LaneState] = &[
        Pending,
        Starting,
        Running,
        SuspectedStall,
        Recovering,
        Replaced,
    ];
    let (from, to): (&'static [LaneState], LaneState) = match event_type {
        E::LaneStarted => (&[Pending], Starting),
        E::StartupAck => (&[Starting], Running),
        E::HeartbeatObserved | E::LeaseRenewed => (&[Running], Running),
        E::StallSuspected => (&[Starting, Running], SuspectedStall),
        E::StallCleared => (&[SuspectedStall], Running),
        E::LaneRecovered => (&[SuspectedStall, Recovering], Running),
        E::ProbeSent => (&[SuspectedStall], Recovering),
        E::ProbeAcknowledged => (&[Recovering], Running),
        E::AgentInterrupted => (&[Recovering], Recovering),
        E::LaneReassigned => (&[Recovering], Replaced),
        E::LaneCompleted => (&[Running, Replaced], Completed),
        E::LaneFailed => (FAILABLE, Failed),
        E::LaneBlocked => (FAILABLE, Blocked),
        E::LaneCancelled => (CANCELLABLE, Cancelled),
        _ => return None,
    };
    Some(Edge { from, to })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_run_events_move_the_run_and_only_lane_events_move_a_lane() {
        for event in EventType::ALL {
            let run = run_edge(event).is_some();
            let lane = lane_edge(event).is_some();
            assert!(!(run && lane), "{event} is in both machines");
            assert_eq!(
                run,
                event.as_str().starts_with("run_") && event != EventType::RunResumed
                    || event == EventType::PlanApproved,
                "{event}"
            );
        }
        // Only the first event leaves the empty run.
        for event in EventType::ALL {
            if let Some(edge) = run_edge(event) {
                assert_eq!(edge.from.contains(&None), event == EventType::RunCreated);
            }
        }
    }
}
