//! The console's prompts: what each asks, and how what was typed becomes a [`Command`]
//! or a message that names what is wrong with it.

use std::path::PathBuf;

use crate::app::Command;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prompt {
    CreateFrom,
    Limits,
    Block,
    Unblock,
}

impl Prompt {
    pub fn title(self) -> &'static str {
        match self {
            Prompt::CreateFrom => "New campaign from a TOML file",
            Prompt::Limits => "Set limits on every node (field=value …)",
            Prompt::Block => "Block (ip:ADDRESS or user:ID, then seconds)",
            Prompt::Unblock => "Unblock (ip:ADDRESS or user:ID)",
        }
    }
}

/// Turns what was typed at `prompt` into a command, or says what is wrong with it.
pub fn parse(prompt: Prompt, text: &str) -> Result<Command, String> {
    let text = text.trim();
    match prompt {
        Prompt::CreateFrom => {
            if text.is_empty() {
                return Err("give the path of a campaign file".into());
            }
            Ok(Command::Create {
                file: PathBuf::from(text),
            })
        }
        Prompt::Limits => {
            let mut pairs = Vec::new();
            for part in text.split_whitespace() {
                let (k, v) = part
                    .split_once('=')
                    .ok_or_else(|| format!("'{part}': expected field=value"))?;
                pairs.push((k.to_string(), v.to_string()));
            }
            if pairs.is_empty() {
                return Err(format!(
                    "give field=value pairs; fields: {}",
                    seckill_core::limits::Limits::FIELDS.join(" ")
                ));
            }
            let mut check = seckill_core::limits::Limits::default();
            for (k, v) in &pairs {
                check.set(k, v)?;
            }
            Ok(Command::SetLimits(pairs))
        }
        Prompt::Block => {
            let mut parts = text.split_whitespace();
            let entry = parts.next().ok_or("give ip:ADDRESS or user:ID")?;
            let entry = seckill_core::blacklist::parse_entry(entry)?;
            let ttl_s = match parts.next() {
                None => 3600,
                Some(t) => t
                    .parse::<u64>()
                    .ok()
                    .filter(|t| *t > 0)
                    .ok_or_else(|| format!("'{t}': seconds must be a positive number"))?,
            };
            Ok(Command::Block { entry, ttl_s })
        }
        Prompt::Unblock => {
            let entry = seckill_core::blacklist::parse_entry(text)?;
            Ok(Command::Unblock { entry })
        }
    }
}
