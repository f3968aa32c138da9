//! The scripts' prelude, generated from the key schema: the tables of the hashes' fields,
//! the key layout, the functions that make order ids and `once` fields, and the Lua
//! functions more than one script runs. A script gets only the pieces it names, so it
//! pays for no table it does not read.

use crate::keys::{self, OrderId, PartitionKeys};

/// The hashes' fields, as a script names them: `PART.stock`.
const TABLES: &[(&str, &[(&str, &str)])] = &[
    ("PART", keys::part::ALL),
    ("ORDER", keys::order::ALL),
    ("META", keys::meta::ALL),
    ("RULES", keys::rules::ALL),
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

/// The prelude `src` needs, then `src`. Panics on a field the key schema does not declare:
/// every script is assembled by the tests.
pub(super) fn assemble(file: &str, src: &str) -> String {
    let mut body = String::new();
    let mut seen = Vec::new();
    for p in pieces() {
        if names(src, p.name) && !seen.contains(&p.lua) {
            body.push_str(&p.lua);
            seen.push(p.lua);
        }
    }
    body.push_str(src);
    let mut out = String::new();
    for (table, fields) in TABLES {
        let mut named: Vec<&str> = Vec::new();
        for at in uses(&body, table) {
            let rest = &body[at + table.len()..];
            let Some(rest) = rest.strip_prefix('.') else {
                continue;
            };
            let end = rest
                .bytes()
                .position(|b| !is_ident(b))
                .unwrap_or(rest.len());
            let field = &rest[..end];
            let declared = fields.iter().any(|(n, _)| n.to_ascii_lowercase() == field);
            assert!(declared, "{file}: {table}.{field} is not declared in keys");
            if !named.contains(&field) {
                named.push(field);
            }
        }
        if named.is_empty() {
            continue;
        }
        let entries: Vec<String> = fields
            .iter()
            .filter_map(|(n, v)| {
                let lua = n.to_ascii_lowercase();
                named
                    .contains(&lua.as_str())
                    .then(|| format!("{lua} = '{v}'"))
            })
            .collect();
        out.push_str(&format!("local {table} = {{{}}}\n", entries.join(", ")));
    }
    out.push_str(&body);
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
            "local PART = {stock = 'stock', held = 'held'}\n\
             local function order_id(campaign, partition, seq) \
             return campaign .. '.' .. partition .. '.' .. seq end\n\
             local s = PART.stock .. PART.held .. PART.stock\nreturn order_id(c, p, 1)"
        );
    }

    #[test]
    #[should_panic(expected = "PART.stok is not declared")]
    fn a_field_the_schema_lacks_is_refused() {
        assemble("t.lua", "return PART.stok");
    }
}
