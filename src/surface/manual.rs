//! `man --out DIR`: one roff page for the tool and one per command, from the
//! same clap tree (and help pages) as `--help`. clap_mangen renders the
//! title, synopsis, description and options; the input-file, example and
//! exit-status sections are preformatted text, so they are emitted in
//! no-fill mode here instead of clap_mangen's reflowed EXTRA section.

use clap::Command;
use serde_json::{Map, Value};
use std::path::Path;

use super::envelope;
use crate::commands::{ErrorKind, FlowError};

/// Write every page into `dir` and answer with a root-less envelope.
pub fn write(tree: &Command, dir: &Path) -> Result<String, FlowError> {
    let pages = pages(tree)?;
    let written = crate::store::pages::write_pages(dir, &pages)?;
    let mut data = Map::new();
    data.insert("ok".into(), Value::Bool(true));
    data.insert("operation".into(), Value::String("man".into()));
    data.insert(
        "out".into(),
        Value::String(written.to_string_lossy().into_owned()),
    );
    let names = pages.into_iter().map(|(name, _)| Value::String(name));
    data.insert("pages".into(), Value::Array(names.collect()));
    Ok(envelope::render(&Value::Object(data)))
}

/// `(file name, roff)` for the tool and each of its commands.
pub fn pages(tree: &Command) -> Result<Vec<(String, Vec<u8>)>, FlowError> {
    let mut pages = vec![("bluetape-flow.1".to_string(), page(tree.clone())?)];
    for sub in tree.get_subcommands() {
        let name = format!("bluetape-flow-{}", sub.get_name());
        let command = sub
            .clone()
            .name(name.clone())
            .display_name(name.clone())
            .bin_name(format!("bluetape-flow {}", sub.get_name()));
        pages.push((format!("{name}.1"), page(command)?));
    }
    Ok(pages)
}

fn page(command: Command) -> Result<Vec<u8>, FlowError> {
    let extra = command
        .get_after_long_help()
        .map(|text| text.to_string())
        .unwrap_or_default();
    let has_subcommands = command.has_subcommands();
    let man = clap_mangen::Man::new(command);
    let mut out = Vec::new();
    let rendered = (|| -> std::io::Result<()> {
        man.render_title(&mut out)?;
        man.render_name_section(&mut out)?;
        man.render_synopsis_section(&mut out)?;
        man.render_description_section(&mut out)?;
        man.render_options_section(&mut out)?;
        if has_subcommands {
            man.render_subcommands_section(&mut out)?;
        }
        Ok(())
    })();
    rendered.map_err(|e| ErrorKind::Contract(format!("cannot render a man page: {e}")))?;
    out.extend_from_slice(preformatted_sections(&extra).as_bytes());
    Ok(out)
}

/// Blocks of help text (separated by blank lines at column 0 before a
/// heading) as `.SH` sections in no-fill mode. A block whose first line is
/// not a heading continues the previous section.
pub fn preformatted_sections(text: &str) -> String {
    let mut out = String::new();
    let mut open = false;
    for block in text.split("\n\n") {
        let mut lines = block.lines();
        let Some(first) = lines.clone().next() else {
            continue;
        };
        let heading = section_title(first);
        if let Some(title) = &heading {
            if open {
                out.push_str(".fi\n");
            }
            out.push_str(&format!(".SH \"{title}\"\n.nf\n"));
            open = true;
            if first.starts_with("Input file") || first.starts_with("Evidence file") {
                out.push_str(&escape(first));
                out.push('\n');
            }
            lines.next();
        } else if !open {
            out.push_str(".SH \"NOTES\"\n.nf\n");
            open = true;
        } else {
            out.push('\n');
        }
        for line in lines {
            out.push_str(&escape(line));
            out.push('\n');
        }
    }
    if open {
        out.push_str(".fi\n");
    }
    out
}

fn section_title(line: &str) -> Option<String> {
    if line.starts_with("Input file") || line.starts_with("Evidence file") {
        return Some("INPUT FILES".to_string());
    }
    let title = line.strip_suffix(':')?;
    let plain = !title.is_empty() && !title.starts_with(' ');
    plain.then(|| title.to_uppercase())
}

/// One line of literal text in roff: backslashes and leading control
/// characters are neutralised, hyphens stay ASCII.
fn escape(line: &str) -> String {
    let text = line.replace('\\', "\\e").replace('-', "\\-");
    if text.starts_with('.') || text.starts_with('\'') {
        format!("\\&{text}")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_blocks_become_literal_sections() {
        let text = "Input file --input <FILE>: a JSON object\n  lane_id  string\n\nExamples:\n  .hidden \\n\n  a-b\n\nExit statuses:\n  0  ok";
        assert_eq!(
            preformatted_sections(text),
            ".SH \"INPUT FILES\"\n.nf\nInput file \\-\\-input <FILE>: a JSON object\n  lane_id  string\n\
             .fi\n.SH \"EXAMPLES\"\n.nf\n  .hidden \\en\n  a\\-b\n.fi\n.SH \"EXIT STATUSES\"\n.nf\n  0  ok\n.fi\n"
        );
    }

    #[test]
    fn a_leading_dot_cannot_become_a_request() {
        assert_eq!(escape(".SH x"), "\\&.SH x");
        assert_eq!(escape("'x"), "\\&'x");
    }
}
