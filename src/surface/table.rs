//! Plain-text tables for people (cli-conventions §1): every cell is made
//! inert (control characters and bidirectional overrides from a receipt
//! cannot move the cursor, recolour the terminal or reorder the line),
//! rows fit the width by truncating cells with `…`, never by wrapping.

use serde_json::Value;

/// The width a table must fit.
pub const WIDTH: usize = 80;

/// Characters that would act on a terminal or reorder text: C0/C1 controls,
/// DEL, and the bidirectional embedding, override and isolate controls.
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200e}' | '\u{200f}' | '\u{061c}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
            | '\u{2028}' | '\u{2029}' | '\u{feff}')
}

/// One cell's text: unsafe characters shown as `?`.
pub fn inert(text: &str) -> String {
    text.chars()
        .map(|c| if is_unsafe(c) { '?' } else { c })
        .collect()
}

/// A JSON value as cell text.
pub fn cell(value: &Value) -> String {
    match value {
        Value::Null => "-".to_string(),
        Value::String(s) => inert(s),
        Value::Bool(flag) => yes_no(*flag),
        other => inert(&other.to_string()),
    }
}

/// A flag as cell text (as [`cell`] shows a JSON boolean).
pub fn yes_no(flag: bool) -> String {
    if flag { "yes" } else { "no" }.to_string()
}

/// Optional text as cell text: `-` when absent (as [`cell`] shows null).
pub fn text_or_dash(text: Option<&str>) -> String {
    text.map_or_else(|| "-".to_string(), inert)
}

/// An optional number as cell text: `-` when absent.
pub fn number_or_dash(number: Option<u64>) -> String {
    number.map_or_else(|| "-".to_string(), |n| n.to_string())
}

/// `text` cut to `width` characters, ending in `…` when cut.
pub fn fit(text: &str, width: usize) -> String {
    let count = text.chars().count();
    if count <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out: String = text.chars().take(width - 1).collect();
    out.push('…');
    out
}

/// Pad (or cut) to exactly `width` characters.
pub fn pad(text: &str, width: usize) -> String {
    let text = fit(text, width);
    let count = text.chars().count();
    format!("{text}{}", " ".repeat(width - count))
}

/// Whether colour is wanted: `--color always|never`, else only on a
/// terminal and never when `NO_COLOR` is set to anything non-empty.
pub fn colour_wanted(choice: &str, stdout_is_tty: bool, no_color: bool) -> bool {
    match choice {
        "always" => true,
        "never" => false,
        _ => stdout_is_tty && !no_color,
    }
}

/// The ANSI colour of a run or lane state.
pub fn state_colour(state: &str) -> Option<&'static str> {
    Some(match state {
        "completed" => "32",
        "running" | "starting" | "approved" => "36",
        "suspected_stall" | "recovering" | "replaced" | "planned" | "pending" => "33",
        "failed" | "blocked" | "cancelled" | "damaged" => "31",
        _ => return None,
    })
}

/// `cell` (already padded) wrapped in the state's colour when wanted.
pub fn paint(cell: String, state: &str, colour: bool) -> String {
    match (colour, state_colour(state)) {
        (true, Some(code)) => format!("\u{1b}[{code}m{cell}\u{1b}[0m"),
        _ => cell,
    }
}

/// A row of padded cells: the last column takes what is left of the width.
pub fn row(cells: &[(String, usize)]) -> String {
    let mut line = String::new();
    let mut used = 0;
    for (i, (text, width)) in cells.iter().enumerate() {
        if i > 0 {
            line.push(' ');
            used += 1;
        }
        if i + 1 == cells.len() {
            let rest = WIDTH.saturating_sub(used);
            line.push_str(&fit(text, rest));
        } else {
            line.push_str(&pad(text, *width));
            used += width;
        }
    }
    line.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_cells_are_inert_and_fit() {
        let hostile = "a\u{1b}[31mred\u{202e}evil\nline\u{7f}";
        let text = inert(hostile);
        assert_eq!(text, "a?[31mred?evil?line?");
        assert!(!text.chars().any(is_unsafe));
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("abc", 4), "abc");
        assert_eq!(pad("ab", 4), "ab  ");
        let long = "x".repeat(200);
        let line = row(&[("1".into(), 5), (long.clone(), 10), (long, 0)]);
        assert_eq!(line.chars().count(), WIDTH);
        assert!(line.ends_with('…'));
    }

    #[test]
    fn colour_follows_the_choice_the_terminal_and_no_color() {
        assert!(colour_wanted("always", false, true));
        assert!(!colour_wanted("never", true, false));
        assert!(colour_wanted("auto", true, false));
        assert!(!colour_wanted("auto", true, true));
        assert!(!colour_wanted("auto", false, false));
    }
}
