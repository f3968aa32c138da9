//! The scripts' prelude, generated from the key schema: the key layout, the functions
//! that make order ids and `once` fields, and the Lua functions more than one script
//! runs, each put before a script that names it. The hashes' and the order events'
//! fields a script names (`PART.stock`, `EVENT.qty`) are spelled into its text
//! (`'stock'`), checked against the schema.

use crate::keys::{self, OrderId, PartitionKeys};

/// The hashes' fields, as a script names them: `PART.stock` is [`keys::part::STOCK`].
const TABLES: &[(&str, &[(&str, &str)])] = &[
    ("PART", keys::part::ALL),
    ("ORDER", keys::order::ALL),
    ("META", keys::meta::ALL),
    ("RULES", keys::rules::ALL),
    ("EVENT", keys::event::ALL),
];

/// A piece of Lua that defines `name`, included when a script names it.
struct Piece {
    name: &'static str,
    lua: String,
}

fn pieces() -> Vec<Piece> {
    vec![
        Piece {
            name: "LAYOUT",
            lua: format!("local LAYOUT = '{}'\n", PartitionKeys::LAYOUT),
        },
        Piece {
            name: "order_id",
            lua: OrderId::lua(),
        },
        Piece {
            name: "first_answer_field",
            lua: keys::once::lua(),
        },
        Piece {
            name: "ticket_field",
            lua: keys::once::lua(),
        },
        Piece {
            name: "FIRST_ANSWER",
            lua: format!("local FIRST_ANSWER = '{}'\n", keys::once::FIRST_ANSWER),
        },
        Piece {
            name: "draw_at_opening",
            lua: include_str!("lib/draw_at_opening.lua").into(),
        },
    ]
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Where `word` stands in `text` as a whole word (not part of a longer name).
fn uses<'t>(text: &'t str, word: &'t str) -> impl Iterator<Item = usize> + 't {
    text.match_indices(word).map(|(i, _)| i).filter(move |&i| {
        let before = i.checked_sub(1).map(|j| text.as_bytes()[j]);
        let after = text.as_bytes().get(i + word.len()).copied();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// Whether `src` names `name`: a function (in lower case) where it is called, a value
/// wherever it stands.
fn names(src: &str, name: &str) -> bool {
    let called = name.starts_with(|c: char| c.is_ascii_lowercase());
    uses(src, name).any(|i| !called || src[i + name.len()..].starts_with('('))
}

/// The prelude `src` needs, then `src`, with every field it names spelled out. Panics on
/// a field the key schema does not declare: every script is assembled by the tests.
pub(super) fn assemble(file: &str, src: &str) -> String {
    let mut out = String::new();
    let mut seen = Vec::new();
    for p in pieces() {
        if names(src, p.name) && !seen.contains(&p.lua) {
            out.push_str(&p.lua);
            seen.push(p.lua);
        }
    }
    out.push_str(src);
    for (table, fields) in TABLES {
        out = spell_fields(file, &out, table, fields);
    }
    out
}

/// `text` with each `TABLE.field` replaced by the field's name as a Lua string: a table
/// built on every call would cost the purchase script microseconds; a literal, nothing.
fn spell_fields(file: &str, text: &str, table: &str, fields: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for at in uses(text, table) {
        let start = at + table.len();
        let Some(rest) = text[start..].strip_prefix('.') else {
            continue;
        };
        let end = rest
            .bytes()
            .position(|b| !is_ident(b))
            .unwrap_or(rest.len());
        let field = &rest[..end];
        let Some((_, value)) = fields.iter().find(|(n, _)| n.to_ascii_lowercase() == field) else {
            panic!("{file}: {table}.{field} is not declared in keys");
        };
        out.push_str(&text[last..at]);
        out.push('\'');
        out.push_str(value);
        out.push('\'');
        last = start + 1 + end;
    }
    out.push_str(&text[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_gets_the_fields_and_pieces_it_names_and_no_more() {
        let got = assemble(
            "t.lua",
            "local s = PART.stock .. PART.held .. PART.stock\nreturn order_id(c, p, 1)",
        );
        assert_eq!(
            got,
            "local function order_id(campaign, partition, seq) \
             return campaign .. '.' .. partition .. '.' .. seq end\n\
             local s = 'stock' .. 'held' .. 'stock'\nreturn order_id(c, p, 1)"
        );
    }

    #[test]
    #[should_panic(expected = "PART.stok is not declared")]
    fn a_field_the_schema_lacks_is_refused() {
        assemble("t.lua", "return PART.stok");
    }
}
