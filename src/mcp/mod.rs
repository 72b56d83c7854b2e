//! `bluetape-flow mcp`: the commands as Model Context Protocol tools over
//! stdio (agent-tools.md), on the official Rust SDK (`rmcp`).
//!
//! A tool call's arguments, held to the tool's parameters
//! ([`catalog::checked`]), are the values the command is built from
//! ([`crate::surface::command_from`]): the same typed command a command line
//! parses to, JSON inputs as the values received (agent-tools.md §4
//! "Values, not files": no file, no text to parse again). It runs through
//! the CLI's own code in this process ([`crate::surface::run_command`]): the
//! same checks, receipt lines, error codes and envelope, a refusal naming
//! the argument the model sent. The owner handle is the server's, named at
//! start; no tool takes it. The mode decides which tools exist.
//!
//! In front of the SDK sits a small framing layer: every line read from
//! stdin is bounded ([`MAX_MESSAGE_BYTES`]) and must be a JSON-RPC 2.0
//! object; an oversized, unparsable or non-JSON-RPC line is answered with a
//! JSON-RPC error (id null when none can be read) and the server keeps
//! serving.

pub mod catalog;

use crate::store::root::StateRoot;
use std::path::PathBuf;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::commands::{ErrorKind, FlowError};
use crate::coordinator::decide::{Bug, InputRule};
use crate::store::discovery::DiscoveryEnv;
use crate::surface::envelope;
use catalog::{Mode, ToolSpec};

/// The largest message (one line) the server reads: room for a call with
/// two JSON inputs of the files' 1 MiB limit each.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// How the server was started.
#[derive(Debug, Clone)]
pub struct Config {
    pub mode: Mode,
    pub state_root: Option<PathBuf>,
    pub owner_file: Option<PathBuf>,
    pub env: DiscoveryEnv,
}

impl Config {
    /// Modes only narrow: `owner` needs the handle it acts with, and
    /// `read-only` takes none.
    pub fn check(&self) -> Result<(), FlowError> {
        match (self.mode, &self.owner_file) {
            (Mode::Owner, None) => Err(InputRule::McpOwnerNeedsHandle.into()),
            (Mode::ReadOnly, Some(_)) => Err(InputRule::McpReadOnlyHandle.into()),
            // Each call hands the handle's path on as a JSON string, which
            // holds text only: a path that is not text would be changed.
            (Mode::Owner, Some(owner)) if owner.to_str().is_none() => {
                Err(InputRule::McpHandleNotUtf8.into())
            }
            _ => Ok(()),
        }
    }
}

/// The MCP server: its tools and how to run them.
struct Server {
    config: Arc<Config>,
    /// The handle the owner tools act with: `--owner-file` until a
    /// `resume` makes a new one.
    owner: Arc<std::sync::Mutex<Option<PathBuf>>>,
    tools: Arc<Vec<ToolSpec>>,
    listed: Arc<Vec<Tool>>,
}

impl Server {
    fn new(config: Config) -> Server {
        let tree = crate::surface::command();
        let tools = catalog::tools(&tree, config.mode);
        let listed = tools
            .iter()
            .map(|spec| {
                // The kind (agent-tools.md §4): a read-only tool says so; a
                // mutation is MCP's default kind and carries no annotation
                // (the instructions say once that mutations only append).
                let annotations = spec
                    .read_only
                    .then(|| ToolAnnotations::new().read_only(true));
                let tool = Tool::new(
                    spec.name.clone(),
                    spec.description.clone(),
                    catalog::input_schema(spec),
                );
                match annotations {
                    Some(annotations) => tool.with_annotations(annotations),
                    None => tool,
                }
            })
            .collect();
        Server {
            owner: Arc::new(std::sync::Mutex::new(config.owner_file.clone())),
            config: Arc::new(config),
            tools: Arc::new(tools),
            listed: Arc::new(listed),
        }
    }
}

/// A tool result carrying an envelope line: text content is the line the
/// CLI prints, `structuredContent` the same object.
fn result(line: &str, ok: bool) -> CallToolResult {
    let mut result = if ok {
        CallToolResult::success(vec![ContentBlock::text(line)])
    } else {
        CallToolResult::error(vec![ContentBlock::text(line)])
    };
    result.structured_content = structured(line);
    result
}

/// The envelope as an object; a view that prints rows (`log`, one JSON
/// object per line) becomes `{"lines": [...]}`.
fn structured(text: &str) -> Option<Value> {
    if let Ok(value @ Value::Object(_)) = serde_json::from_str::<Value>(text) {
        return Some(value);
    }
    let lines: Result<Vec<Value>, _> = text.lines().map(serde_json::from_str).collect();
    lines.ok().map(|lines| json!({ "lines": lines }))
}

fn refusal(error: &FlowError) -> CallToolResult {
    result(&envelope::failure(error).1, false)
}

/// Run one call: the command built from the values received (and what
/// the server adds: its state root, its owner handle and that handle's
/// run) and run by the CLI's own code in this process. Returns the
/// envelope line and whether it is a success (and, after a `resume`, the
/// handle to act with from now on).
fn invoke(
    config: &Config,
    owner: Option<&std::path::Path>,
    spec: &ToolSpec,
    mut arguments: Map<String, Value>,
) -> (String, bool, Option<PathBuf>) {
    let refused = |error: FlowError| (envelope::failure(&error).1, false, None);
    let text = |path: &std::path::Path| Value::String(path.to_string_lossy().into_owned());
    if let Some(owner) = owner {
        if spec.takes_owner {
            arguments.insert("owner_file".into(), text(owner));
        }
        if spec.acts_on_the_handles_run {
            // The run is the handle's: read from it here (and, for a
            // mutation, held to it again by the command, which reads the
            // handle under its root). Before the command holds its root:
            // by the handle's path.
            match crate::store::handle::read_handle(StateRoot::rootless().at(owner), None) {
                Ok(handle) => {
                    arguments.insert("run_id".into(), Value::String(handle.run_id));
                }
                Err(error) => return refused(FlowError::from(error)),
            }
        }
    }
    // One clock: a step the command needs a time for and the call names
    // none of happens now, by the server's clock.
    if spec.at_defaults_to_now && !arguments.contains_key("at") {
        let now = crate::receipt::primitives::format_now(chrono::Utc::now());
        arguments.insert("at".into(), Value::String(now));
    }
    let new_owner = match owner {
        Some(owner) if spec.makes_owner => {
            let next = crate::store::private::next_handle(owner);
            arguments.insert("new_owner_file".into(), text(&next));
            Some(next)
        }
        _ => None,
    };
    // The arguments were held to the tool's parameters: a command that
    // cannot be built from them is a bug of the catalog, said as one.
    let command = match crate::surface::command_from(&spec.name, arguments.clone()) {
        Ok(command) => command,
        Err(why) => {
            return refused(
                ErrorKind::Internal(Bug::ArgumentsMakeNoCommand(why.to_string())).into(),
            );
        }
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::surface::run_command(
            config.state_root.clone(),
            command,
            &arguments,
            &config.env,
            &mut out,
            &mut err,
        )
    }));
    let said = |bytes: &[u8]| String::from_utf8_lossy(bytes).trim_end().to_string();
    match outcome {
        // After `resume` the new handle takes the server's own path back
        // (resume removed the old handle there), so the server's config
        // (`--owner-file`) names a live handle across restarts
        // (DEVIATIONS 94). If that cannot be done, the server acts with
        // the new name from now on.
        Ok(0) => {
            let new_owner = match (new_owner, owner) {
                (Some(next), Some(stable))
                    if crate::store::handle::rename_handle(
                        &StateRoot::rootless(),
                        &next,
                        stable,
                    )
                    .is_ok() =>
                {
                    Some(stable.to_path_buf())
                }
                (new_owner, _) => new_owner,
            };
            (said(&out), true, new_owner)
        }
        Ok(_) => (said(&err), false, None),
        Err(payload) => refused(crate::surface::panic_error(payload.as_ref())),
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info = Implementation::new("bluetape-flow", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(format!(
            "bluetape-flow {} mode: each tool is the CLI command of the same name; arguments are its flags in snake_case, JSON inputs (evidence, input, decision, changed_paths) are JSON values. {} A result is the command's JSON envelope; a refusal is a tool error carrying it.{}",
            self.config.mode.name(),
            catalog::SHARED_ARGUMENTS,
            if self.config.mode == Mode::Owner {
                " Mutations only append to the run's receipt (none destroys anything) and act with the owner handle this server was started with, on its run; no tool takes a handle, token or identity. run-approve is a person's act through the CLI."
            } else {
                " No tool writes."
            }
        ));
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.listed.as_ref().clone(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.listed.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(spec) = self.tools.iter().find(|t| t.name == request.name).cloned() else {
            use crate::surface::registry::{Offer, named};
            let why = match named(&request.name).map(|c| c.offer) {
                Some(Offer::Never) => {
                    "is never a tool (a person runs it through the CLI)".to_string()
                }
                Some(Offer::Owner) => format!(
                    "is not available in {} mode (it writes)",
                    self.config.mode.name()
                ),
                _ => "does not exist".to_string(),
            };
            return Err(ErrorData::invalid_params(
                format!("tool `{}` {why}", request.name),
                Some(json!({"mode": self.config.mode.name()})),
            ));
        };
        let arguments = request.arguments.unwrap_or_default();
        // The host's values (the clock, the head fence) ride in `_meta`,
        // which the SDK moves from the request into the context.
        let arguments = match catalog::checked(&spec, &arguments, &context.meta.0) {
            Ok(arguments) => arguments,
            Err(message) => {
                return Ok(refusal(&FlowError::contract(message)).into());
            }
        };
        let config = self.config.clone();
        let owner = self.owner.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let current = owner.lock().map(|o| o.clone()).unwrap_or_default();
            let (line, ok, new_owner) = invoke(&config, current.as_deref(), &spec, arguments);
            if let (Some(new_owner), Ok(mut held)) = (new_owner, owner.lock()) {
                *held = Some(new_owner);
            }
            (line, ok)
        })
        .await;
        Ok(match joined {
            Ok((line, ok)) => result(&line, ok),
            Err(_) => refusal(&FlowError::from(ErrorKind::Internal(Bug::CallUnfinished))),
        }
        .into())
    }
}

/// A JSON-RPC error with no request to answer (`id` null unless one could
/// be read).
fn rpc_error(id: Value, code: i64, message: &str) -> Vec<u8> {
    let mut line = serde_json::to_vec(&json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code, "message": message},
    }))
    .unwrap_or_default();
    line.push(b'\n');
    line
}

/// Check one whole line; `Ok` passes it on to the SDK, `Err` is the answer.
fn screen(line: &[u8]) -> Result<(), Vec<u8>> {
    let value: Value = serde_json::from_slice(line)
        .map_err(|e| rpc_error(Value::Null, -32700, &format!("Parse error: {e}")))?;
    let Value::Object(map) = &value else {
        return Err(rpc_error(
            Value::Null,
            -32600,
            "Invalid Request: a message is one JSON-RPC 2.0 object per line",
        ));
    };
    if map.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        let id = match map.get("id") {
            Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
            _ => Value::Null,
        };
        return Err(rpc_error(
            id,
            -32600,
            "Invalid Request: \"jsonrpc\" must be \"2.0\"",
        ));
    }
    Ok(())
}

/// Read stdin line by line, never buffering more than
/// [`MAX_MESSAGE_BYTES`]; good lines go to the SDK, bad ones are answered.
async fn read_messages(
    mut to_sdk: tokio::io::DuplexStream,
    answers: mpsc::UnboundedSender<Vec<u8>>,
) -> std::io::Result<()> {
    let mut reader = tokio::io::BufReader::with_capacity(64 * 1024, tokio::io::stdin());
    let mut line: Vec<u8> = Vec::new();
    let mut oversized = false;
    loop {
        let (take, complete) = {
            let available = reader.fill_buf().await?;
            if available.is_empty() {
                break;
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            if !oversized && line.len() + take > MAX_MESSAGE_BYTES {
                oversized = true;
                line = Vec::new();
            }
            if !oversized {
                line.extend_from_slice(&available[..take]);
            }
            (take, newline.is_some())
        };
        reader.consume(take);
        if !complete {
            continue;
        }
        if oversized {
            oversized = false;
            let _ = answers.send(rpc_error(
                Value::Null,
                -32600,
                &format!(
                    "Invalid Request: message exceeds {MAX_MESSAGE_BYTES} bytes; it was discarded"
                ),
            ));
            continue;
        }
        let text = line.trim_ascii();
        if !text.is_empty() {
            match screen(text) {
                Ok(()) => {
                    to_sdk.write_all(text).await?;
                    to_sdk.write_all(b"\n").await?;
                }
                Err(answer) => {
                    let _ = answers.send(answer);
                }
            }
        }
        line.clear();
    }
    if oversized {
        let _ = answers.send(rpc_error(
            Value::Null,
            -32600,
            &format!(
                "Invalid Request: message exceeds {MAX_MESSAGE_BYTES} bytes; it was discarded"
            ),
        ));
    }
    to_sdk.shutdown().await
}

/// Serve until stdin ends.
pub fn serve(config: Config) -> Result<(), FlowError> {
    config.check()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| FlowError::contract(format!("mcp: cannot start the runtime: {e}")))?;
    runtime
        .block_on(run(Server::new(config)))
        .map_err(|e| FlowError::contract(format!("mcp: {e}")))
}

async fn run(server: Server) -> std::io::Result<()> {
    let (to_sdk, sdk_in) = tokio::io::duplex(1 << 16);
    let (sdk_out, from_sdk) = tokio::io::duplex(1 << 16);
    let (answers, mut outgoing) = mpsc::unbounded_channel::<Vec<u8>>();
    // One writer owns stdout: the SDK's lines and the framing layer's
    // answers never interleave.
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = outgoing.recv().await {
            stdout.write_all(&line).await?;
            stdout.flush().await?;
        }
        Ok::<_, std::io::Error>(())
    });
    let sdk_lines = answers.clone();
    let forward = tokio::spawn(async move {
        let mut reader = tokio::io::BufReader::new(from_sdk);
        loop {
            let mut line = Vec::new();
            if reader.read_until(b'\n', &mut line).await? == 0 {
                break;
            }
            if sdk_lines.send(line).is_err() {
                break;
            }
        }
        Ok::<_, std::io::Error>(())
    });
    let reader = tokio::spawn(read_messages(to_sdk, answers));
    // The handshake runs while the reader feeds it; a client that leaves
    // before initializing ends the session.
    if let Ok(service) = server.serve((sdk_in, sdk_out)).await {
        let _ = service.waiting().await;
    }
    let read = reader.await.unwrap_or(Ok(()));
    let _ = forward.await;
    let _ = writer.await;
    read
}
