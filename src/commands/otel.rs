//! `otel-export` (contracts/otel.md): a verified run as an OpenTelemetry
//! trace, sent to an OTLP/HTTP receiver (`--endpoint`, or the SDKs'
//! environment variables) or written as OTLP/JSON (`--out`). Read-only on
//! the state root: the run is verified and replayed in full first (pass 1,
//! the breaches and final states), then streamed again (pass 2, every
//! line re-verified) into bounded batches that leave as they fill.

use crate::coordinator::decide::{InputRefusal, InputRule};
use crate::store::root::StateRoot;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use prost::Message;
use serde::Serialize;
use serde_json::Value;

use super::error::{ErrorKind, FlowError, FlowResult};
use crate::coordinator::otel::{Exporter, LaneFacts, RunFacts, SEMCONV_VERSION, Totals};
use crate::coordinator::raced::Raced;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};

/// Default time one OTLP request may take (the SDKs' default, 10 s).
const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// The way on when a receiver cannot be reached or refuses.
const HINT: &str = "check that the receiver runs at that URL and accepts OTLP/HTTP protobuf (and its key, --header KEY=VALUE); or write the trace with --out FILE and send that file later; exporting again sends the same span ids";
/// Most `--header` options.
const MAX_HEADERS: usize = 32;
/// Longest header value accepted.
const MAX_HEADER_VALUE: usize = 8192;

/// An exporter setting as the SDKs read it: a traces-only variable, which
/// wins, and a general one.
#[derive(Debug, Clone, Copy)]
enum OtelSetting {
    Endpoint,
    Headers,
    Protocol,
    Timeout,
}

impl OtelSetting {
    const ALL: [OtelSetting; 4] = [Self::Endpoint, Self::Headers, Self::Protocol, Self::Timeout];

    /// The traces-only variable, then the general one.
    fn names(self) -> [&'static str; 2] {
        match self {
            Self::Endpoint => [
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "OTEL_EXPORTER_OTLP_ENDPOINT",
            ],
            Self::Headers => [
                "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
                "OTEL_EXPORTER_OTLP_HEADERS",
            ],
            Self::Protocol => [
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                "OTEL_EXPORTER_OTLP_PROTOCOL",
            ],
            Self::Timeout => [
                "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
                "OTEL_EXPORTER_OTLP_TIMEOUT",
            ],
        }
    }
}

/// One exporter variable that is set: its name and value, and whether it
/// is the traces-only one.
#[derive(Debug, Clone, Copy)]
struct OtelVar<'e> {
    name: &'static str,
    value: &'e str,
    traces_only: bool,
}

/// The OpenTelemetry exporter variables, read once from the process (the
/// names the SDKs read; an empty value counts as unset, as in the SDKs).
#[derive(Debug, Clone, Default)]
pub struct OtelEnv {
    set: std::collections::BTreeMap<&'static str, String>,
}

impl OtelEnv {
    pub fn from_process() -> OtelEnv {
        let names = OtelSetting::ALL.into_iter().flat_map(OtelSetting::names);
        OtelEnv {
            set: names
                .filter_map(|name| {
                    let value = std::env::var(name).ok()?;
                    (!value.trim().is_empty()).then_some((name, value))
                })
                .collect(),
        }
    }

    /// The variable of `setting` that decides: the traces-only one if set,
    /// else the general one.
    fn deciding(&self, setting: OtelSetting) -> Option<OtelVar<'_>> {
        let [traces, general] = setting.names();
        [(traces, true), (general, false)]
            .into_iter()
            .find_map(|(name, traces_only)| {
                Some(OtelVar {
                    name,
                    value: self.set.get(name)?,
                    traces_only,
                })
            })
    }
}

/// What the command line asked for.
#[derive(Debug, Clone)]
pub struct ExportArgs {
    pub run_id: String,
    pub endpoint: Option<String>,
    pub out: Option<PathBuf>,
    pub force: bool,
    /// `KEY=VALUE`, as given (the values are secrets: never echoed).
    pub headers: Vec<String>,
}

/// Where the trace goes.
#[derive(Debug, Clone)]
pub enum Target {
    Endpoint {
        url: String,
        /// The URL as errors and answers name it: no user info, no query.
        shown: String,
        /// Where the URL came from: `--endpoint` or a variable's name.
        source: &'static str,
        headers: Vec<(String, String)>,
        timeout: Duration,
    },
    File {
        out: PathBuf,
        force: bool,
    },
}

/// `url` as it may be shown: scheme, host, port and path only. `None`
/// when it is not an absolute http(s) URL.
pub fn shown_endpoint(url: &str) -> Option<String> {
    let uri: ureq::http::Uri = url.parse().ok()?;
    let scheme = uri.scheme_str()?;
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let host = uri.host().filter(|h| !h.is_empty())?;
    let port = uri.port_u16().map(|p| format!(":{p}")).unwrap_or_default();
    Some(format!("{scheme}://{host}{port}{}", uri.path()))
}

/// `OTEL_EXPORTER_OTLP_ENDPOINT` is a base URL: the traces path is added
/// to it, as the SDKs do.
fn with_traces_path(base: &str) -> String {
    if base.ends_with('/') {
        format!("{base}v1/traces")
    } else {
        format!("{base}/v1/traces")
    }
}

/// A header name: an RFC 9110 token.
fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A header value: visible ASCII, spaces and tabs, no line breaks.
fn is_header_value(value: &str) -> bool {
    value.len() <= MAX_HEADER_VALUE
        && value
            .bytes()
            .all(|b| b == b'\t' || (0x20..0x7f).contains(&b))
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Add `name: value` (replacing an earlier value of the same name, case
/// insensitively). Refusals name the header, never its value.
fn put_header(
    headers: &mut Vec<(String, String)>,
    name: &str,
    value: &str,
    origin: &str,
) -> FlowResult<()> {
    let name = name.trim();
    if !is_header_name(name) {
        return Err(FlowError::from(InputRefusal::OtelHeaderName {
            origin: origin.into(),
        }));
    }
    if !is_header_value(value) {
        return Err(FlowError::from(InputRefusal::OtelHeaderValue {
            origin: origin.into(),
            name: name.into(),
            max_bytes: MAX_HEADER_VALUE,
        }));
    }
    headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    headers.push((name.to_string(), value.to_string()));
    if headers.len() > MAX_HEADERS {
        return Err(FlowError::from(InputRefusal::OtelTooManyHeaders {
            max: MAX_HEADERS,
        }));
    }
    Ok(())
}

/// `key1=value1,key2=value2` with percent-encoded values (the SDKs'
/// `OTEL_EXPORTER_OTLP_HEADERS` format).
fn env_headers(headers: &mut Vec<(String, String)>, list: &str, variable: &str) -> FlowResult<()> {
    for item in list.split(',').filter(|i| !i.trim().is_empty()) {
        let Some((name, value)) = item.split_once('=') else {
            return Err(FlowError::from(InputRefusal::OtelHeaderList {
                variable: variable.into(),
            }));
        };
        let value = percent_decode(value.trim()).ok_or_else(|| {
            FlowError::from(InputRefusal::OtelHeaderEncoding {
                variable: variable.into(),
                name: name.trim().into(),
            })
        })?;
        put_header(headers, name, &value, variable)?;
    }
    Ok(())
}

fn timeout_of(env: &OtelEnv) -> FlowResult<Duration> {
    let Some(var) = env.deciding(OtelSetting::Timeout) else {
        return Ok(Duration::from_millis(DEFAULT_TIMEOUT_MS));
    };
    match var.value.trim().parse::<u64>() {
        Ok(ms) if ms > 0 && ms <= 600_000 => Ok(Duration::from_millis(ms)),
        _ => Err(FlowError::from(InputRefusal::OtelTimeout {
            variable: var.name.into(),
        })),
    }
}

/// Choose the target as the SDKs would: `--out`, else `--endpoint` as
/// given, else `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as given, else
/// `OTEL_EXPORTER_OTLP_ENDPOINT` plus `/v1/traces`. Headers: the
/// `OTEL_EXPORTER_OTLP_HEADERS` list, then `..._TRACES_HEADERS`, then
/// `--header`, a later one replacing an earlier one of the same name.
pub fn resolve_target(args: &ExportArgs, env: &OtelEnv) -> FlowResult<Target> {
    if let Some(out) = &args.out {
        if !args.headers.is_empty() {
            return Err(InputRule::OtelHeaderWithOut.into());
        }
        return Ok(Target::File {
            out: out.clone(),
            force: args.force,
        });
    }
    if args.force {
        return Err(InputRule::OtelForceWithoutOut.into());
    }
    let (url, source) = match (&args.endpoint, env.deciding(OtelSetting::Endpoint)) {
        (Some(url), _) => (url.clone(), "--endpoint"),
        (None, Some(var)) if var.traces_only => (var.value.to_string(), var.name),
        (None, Some(base)) => (with_traces_path(base.value), base.name),
        (None, None) => {
            return Err(InputRule::OtelNoTarget.into());
        }
    };
    let url = url.trim().to_string();
    let shown = shown_endpoint(&url).ok_or_else(|| {
        FlowError::from(InputRefusal::OtelEndpoint {
            origin: source.into(),
        })
    })?;
    if let Some(var) = env.deciding(OtelSetting::Protocol)
        && var.value.trim() != "http/protobuf"
    {
        return Err(FlowError::from(InputRefusal::OtelProtocol {
            variable: var.name.into(),
            protocol: crate::coordinator::otel::bounded(var.value.trim()),
        }));
    }
    // Both header lists apply, the general one first: a later header
    // replaces an earlier one of the same name.
    let mut headers = Vec::new();
    let [traces, general] = OtelSetting::Headers.names();
    for name in [general, traces] {
        if let Some(list) = env.set.get(name) {
            env_headers(&mut headers, list, name)?;
        }
    }
    for header in &args.headers {
        let Some((name, value)) = header.split_once('=') else {
            return Err(InputRule::OtelHeaderShape.into());
        };
        put_header(&mut headers, name, value, "--header")?;
    }
    Ok(Target::Endpoint {
        url,
        shown,
        source,
        headers,
        timeout: timeout_of(env)?,
    })
}

/// Liveness digests leave the replayed lanes every this many events, as in
/// `bundle-verify`: pass 1's memory stays 16 bytes per heartbeat.
const SPILL_EVERY: u64 = 256;

/// Pass 1: the full streaming verification and replay of a Phase 2 run
/// (the checks of `bundle-export`'s), and the facts the trace needs from
/// it. The replayed state is dropped before pass 2.
fn replay(root: &StateRoot, run_id: &str) -> FlowResult<(super::ledger::OpenRun, RunFacts)> {
    let spilled = std::sync::Arc::new(crate::coordinator::state::CompactDigests::default());
    let mut seen = 0u64;
    let (run, state, position) = super::rebuild::replay_whole(
        root,
        run_id,
        "otel-export needs a Phase 2 (manifest 1.1) run: a Phase 1 run has no lanes to trace",
        |_, state| {
            seen += 1;
            if seen.is_multiple_of(SPILL_EVERY) {
                state.spill_liveness_digests(&spilled)?;
            }
            Ok(())
        },
    )?;
    let meta = run.manifest.run.as_ref();
    let text = |key: &str| {
        meta.and_then(|r| r.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let mut breaches = state.breaches().to_vec();
    breaches.sort_by_key(|b| b.sequence);
    let lanes = state
        .lanes()
        .iter()
        .map(|(id, lane)| {
            (
                id.to_string(),
                LaneFacts {
                    agent_id: lane.agent_id.to_string(),
                    write_scope: lane.write_scope.clone(),
                    state: lane.state,
                    parent_lane_id: lane.parent_lane_id.clone(),
                    replacement_lane_id: lane.replacement_lane_id.clone(),
                },
            )
        })
        .collect();
    let facts = RunFacts {
        run_id: run_id.to_string(),
        workflow_type: text("workflow_type"),
        manifest_hash: text("manifest_hash"),
        manifest_version: run.manifest.contract.version.clone(),
        run_state: state.run_state_enum(),
        head_sequence: position.sequence,
        head_checksum: position.checksum.clone(),
        genesis_checksum: String::new(),
        breaches,
        lanes,
    };
    Ok((run, facts))
}

/// Pass 2: stream the verified receipt into batches, handing each to
/// `emit` as it fills. The export covers exactly the events pass 1
/// verified; a receipt whose line at that head now differs is the
/// retryable conflict.
fn stream(
    run: &super::ledger::OpenRun,
    facts: RunFacts,
    mut emit: impl FnMut(&ExportTraceServiceRequest) -> FlowResult<()>,
) -> FlowResult<(String, Totals)> {
    let head_sequence = facts.head_sequence;
    let head_checksum = facts.head_checksum.clone();
    let mut pending = Some(facts);
    let mut exporter: Option<Exporter> = None;
    let mut failure: Option<FlowError> = None;
    let mut head_seen = false;
    let version = env!("CARGO_PKG_VERSION");
    let streamed = super::views::stream_events(run, None, |event| {
        let event = &event.to_map();
        let sequence = event.get("sequence").and_then(Value::as_u64).unwrap_or(0);
        if sequence > head_sequence {
            return Ok(());
        }
        let checksum = event.get("checksum").and_then(Value::as_str).unwrap_or("");
        if sequence == head_sequence {
            head_seen = checksum == head_checksum;
        }
        if exporter.is_none()
            && let Some(mut facts) = pending.take()
        {
            facts.genesis_checksum = checksum.to_string();
            exporter = Some(Exporter::new(facts, version));
        }
        let Some(exporter) = exporter.as_mut() else {
            return Ok(());
        };
        exporter.observe(event);
        while let Some(batch) = exporter.take_ready() {
            if let Err(e) = emit(&batch) {
                failure = Some(e);
                return Err("export stopped".into());
            }
        }
        Ok(())
    });
    if let Some(e) = failure {
        return Err(e);
    }
    streamed?;
    let exporter = match exporter {
        Some(exporter) if head_seen => exporter,
        _ => {
            return Err(FlowError::from(Raced::OtelExport));
        }
    };
    let trace = exporter.trace_id_hex();
    let (batches, totals) = exporter.finish();
    for batch in &batches {
        emit(batch)?;
    }
    Ok((trace, totals))
}

/// The receiver's answer to one request.
fn post(
    agent: &ureq::Agent,
    url: &str,
    shown: &str,
    headers: &[(String, String)],
    batch: &ExportTraceServiceRequest,
    rejected: &mut u64,
) -> FlowResult<()> {
    let body = batch.encode_to_vec();
    let mut request = agent
        .post(url)
        .header("Content-Type", "application/x-protobuf")
        .header(
            "User-Agent",
            concat!("bluetape-flow/", env!("CARGO_PKG_VERSION")),
        );
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let failed = |message: String, retryable: bool| ErrorKind::Export {
        endpoint: shown.to_string(),
        message,
        retryable,
    };
    let mut response = match request.send(&body[..]) {
        Ok(response) => response,
        Err(e) => {
            let (what, retryable) = match &e {
                ureq::Error::Timeout(_) => ("timed out".to_string(), true),
                ureq::Error::HostNotFound => ("host not found".to_string(), true),
                ureq::Error::ConnectionFailed => ("connection failed".to_string(), true),
                ureq::Error::Io(io) => (io.to_string(), true),
                ureq::Error::Tls(_) | ureq::Error::Rustls(_) => {
                    ("TLS handshake failed".to_string(), false)
                }
                _ => ("request failed".to_string(), false),
            };
            return Err(failed(
                format!("OTLP receiver {shown} is unreachable: {what}"),
                retryable,
            )
            .hinted(HINT));
        }
    };
    let status = response.status().as_u16();
    if !(200..300).contains(&status) {
        let retryable = matches!(status, 429 | 502 | 503 | 504);
        return Err(failed(
            format!("OTLP receiver {shown} refused the export: HTTP {status}"),
            retryable,
        )
        .hinted(HINT));
    }
    let bytes = response
        .body_mut()
        .with_config()
        .limit(1 << 20)
        .read_to_vec()
        .unwrap_or_default();
    if let Ok(answer) = ExportTraceServiceResponse::decode(&bytes[..])
        && let Some(partial) = answer.partial_success
    {
        *rejected += u64::try_from(partial.rejected_spans).unwrap_or(0);
    }
    Ok(())
}

/// What `otel-export` answers: where the trace went and what it holds.
#[derive(Debug, Serialize)]
pub struct Exported {
    #[serde(flatten)]
    pub target: ExportedTo,
    pub run_id: String,
    pub trace_id: String,
    pub spans: u64,
    pub span_events: u64,
    pub batches: u64,
    /// The verified head the trace describes.
    pub sequence: u64,
    pub checksum: String,
    /// The OpenTelemetry semantic conventions version the spans follow.
    pub semconv: &'static str,
}

/// Where `otel-export` sent the trace.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum ExportedTo {
    /// An OTLP/JSON file (`--out`).
    File {
        path: String,
        /// `otlp-json`.
        format: &'static str,
    },
    /// An OTLP/HTTP receiver.
    Endpoint {
        /// The endpoint as shown (no user info, no query).
        endpoint: String,
        /// Which flag or variable named it.
        endpoint_source: String,
        /// `otlp-http-protobuf`.
        format: &'static str,
        /// The header names sent (lower case, sorted; never their values).
        headers: Vec<String>,
        /// Spans the receiver said it rejected.
        rejected_spans: u64,
    },
}

/// `otel-export`: verify and replay the run, then export it.
pub fn export(
    root: &StateRoot,
    args: &ExportArgs,
    env: &OtelEnv,
    cwd: &Path,
) -> FlowResult<Exported> {
    let target = resolve_target(args, env)?;
    let (run, facts) = replay(root, &args.run_id)?;
    let (sequence, checksum) = (facts.head_sequence, facts.head_checksum.clone());
    let (exported_to, (trace, totals)) = match &target {
        Target::File { out, force } => {
            let mut failure: Option<FlowError> = None;
            let mut result = None;
            let written =
                crate::store::output::write_view_with(out, cwd, root, *force, |file, temp| {
                    let io = |e: std::io::Error| crate::store::StoreError::io(&e, temp);
                    let mut writer = std::io::BufWriter::with_capacity(1 << 16, &mut *file);
                    let outcome = stream(&run, facts, |batch| {
                        serde_json::to_writer(&mut writer, batch)
                            .map_err(|e| FlowError::contract(format!("OTLP/JSON: {e}")))?;
                        writer
                            .write_all(b"\n")
                            .map_err(|e| FlowError::from(crate::store::StoreError::io(&e, temp)))
                    });
                    match outcome {
                        Ok(done) => result = Some(done),
                        Err(e) => {
                            failure = Some(e);
                            return Err(crate::store::StoreError::invalid("export stopped"));
                        }
                    }
                    writer.flush().map_err(io)
                });
            let path = match (written, failure) {
                (_, Some(e)) => return Err(e),
                (Err(e), None) => return Err(e.into()),
                (Ok(path), None) => path,
            };
            let done = result.ok_or_else(|| FlowError::contract("export wrote nothing"))?;
            let to = ExportedTo::File {
                path: path.to_string_lossy().into_owned(),
                format: "otlp-json",
            };
            (to, done)
        }
        Target::Endpoint {
            url,
            shown,
            source,
            headers,
            timeout,
        } => {
            let config = ureq::Agent::config_builder()
                .timeout_global(Some(*timeout))
                .http_status_as_error(false)
                .max_redirects(0)
                .build();
            let agent: ureq::Agent = config.into();
            let mut rejected = 0u64;
            let done = stream(&run, facts, |batch| {
                post(&agent, url, shown, headers, batch, &mut rejected)
            })?;
            let mut names: Vec<String> = headers.iter().map(|(n, _)| n.to_lowercase()).collect();
            names.sort();
            let to = ExportedTo::Endpoint {
                endpoint: shown.to_string(),
                endpoint_source: source.to_string(),
                format: "otlp-http-protobuf",
                headers: names,
                rejected_spans: rejected,
            };
            (to, done)
        }
    };
    Ok(Exported {
        target: exported_to,
        run_id: args.run_id.clone(),
        trace_id: trace,
        spans: totals.spans,
        span_events: totals.span_events,
        batches: totals.batches,
        sequence,
        checksum,
        semconv: SEMCONV_VERSION,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&'static str, &str)]) -> OtelEnv {
        OtelEnv {
            set: vars.iter().map(|(n, v)| (*n, v.to_string())).collect(),
        }
    }

    fn args(headers: &[&str]) -> ExportArgs {
        ExportArgs {
            run_id: "r".into(),
            endpoint: None,
            out: None,
            force: false,
            headers: headers.iter().map(|h| h.to_string()).collect(),
        }
    }

    fn endpoint(target: Target) -> (String, &'static str, Vec<(String, String)>, Duration) {
        match target {
            Target::Endpoint {
                url,
                source,
                headers,
                timeout,
                ..
            } => (url, source, headers, timeout),
            Target::File { .. } => panic!("a file target"),
        }
    }

    #[test]
    fn the_traces_only_variable_wins_and_both_header_lists_apply_general_first() {
        let both = env(&[
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://traces:4318/custom",
            ),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://general:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "2500"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "900"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "a=general,b=general"),
            ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "b=traces"),
        ]);
        let (url, source, headers, timeout) =
            endpoint(resolve_target(&args(&["a=flag"]), &both).unwrap());
        assert_eq!(
            (url.as_str(), source),
            (
                "http://traces:4318/custom",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
            )
        );
        assert_eq!(timeout, Duration::from_millis(2500));
        // A later list replaces a header of the same name; --header is last.
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        assert_eq!(headers, [("b", "traces"), ("a", "flag")]);

        let general = env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://general:4318"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "900"),
        ]);
        let (url, source, headers, timeout) =
            endpoint(resolve_target(&args(&[]), &general).unwrap());
        assert_eq!(
            (url.as_str(), source),
            (
                "http://general:4318/v1/traces",
                "OTEL_EXPORTER_OTLP_ENDPOINT"
            )
        );
        assert_eq!(timeout, Duration::from_millis(900));
        assert!(headers.is_empty());

        let unset = env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://general:4318")]);
        let (.., timeout) = endpoint(resolve_target(&args(&[]), &unset).unwrap());
        assert_eq!(timeout, Duration::from_millis(DEFAULT_TIMEOUT_MS));
    }

    #[test]
    fn a_bad_setting_is_refused_naming_the_variable_that_decides() {
        for (vars, named) in [
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "0"),
                    ("OTEL_EXPORTER_OTLP_TIMEOUT", "900"),
                ],
                "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            ),
            (
                vec![("OTEL_EXPORTER_OTLP_TIMEOUT", "soon")],
                "OTEL_EXPORTER_OTLP_TIMEOUT",
            ),
        ] {
            let mut vars = vars;
            vars.push(("OTEL_EXPORTER_OTLP_ENDPOINT", "http://general:4318"));
            let error = resolve_target(&args(&[]), &env(&vars)).unwrap_err();
            assert_eq!(
                error,
                FlowError::from(InputRefusal::OtelTimeout {
                    variable: named.into()
                })
            );
        }
        let grpc = env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://general:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ]);
        assert_eq!(
            resolve_target(&args(&[]), &grpc).unwrap_err(),
            FlowError::from(InputRefusal::OtelProtocol {
                variable: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL".into(),
                protocol: "grpc".into(),
            })
        );
    }
}
