//! `payments`: money the sale took that it does not keep. `refunds` lists the payments
//! owed back (one that came after its hold expired, or a second one), `list` every
//! payment taken with what became of it, unmatched ones (for orders nobody knows) among
//! them.

use clap::Subcommand;
use seckill_core::campaign::format_instant_ms;
use seckill_core::control;
use seckill_core::payments::{self, PaymentRecord};
use std::process::ExitCode;

use super::connect;

#[derive(Subcommand)]
pub(super) enum PaymentsCommand {
    /// Payments owed back: order, payment, amount, currency and why (expired or duplicate).
    Refunds {
        /// Only this campaign's.
        #[arg(long)]
        campaign: Option<String>,
        /// A JSON list, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Every payment taken, with its status (paid, refund_due, refunded, mismatch,
    /// pending, failed), and the unmatched ones.
    List {
        #[arg(long)]
        campaign: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

pub(super) fn run(redis: &str, command: PaymentsCommand) -> anyhow::Result<ExitCode> {
    let mut con = connect(redis)?;
    let (campaign, json, refunds_only) = match command {
        PaymentsCommand::Refunds { campaign, json } => (campaign, json, true),
        PaymentsCommand::List { campaign, json } => (campaign, json, false),
    };
    let campaigns = match &campaign {
        Some(id) => vec![control::get(&mut con, id)?],
        None => control::list(&mut con)?,
    };
    let mut records: Vec<PaymentRecord> = Vec::new();
    for c in &campaigns {
        records.extend(payments::of_campaign(
            &mut con,
            &c.spec.id,
            c.spec.partitions,
        )?);
    }
    if !refunds_only && campaign.is_none() {
        records.extend(payments::unmatched(&mut con)?);
    }
    if refunds_only {
        records.retain(|r| r.status == "refund_due");
    }
    if json {
        let list: Vec<serde_json::Value> = records
            .iter()
            .map(|r| {
                serde_json::json!({
                    "order_id": r.order_id,
                    "payment_id": r.payment_id,
                    "amount_cents": r.amount(),
                    "currency": r.currency,
                    "status": r.status,
                    "reason": r.reason,
                    "at_ms": r.ms.parse::<i64>().unwrap_or(0),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(ExitCode::SUCCESS);
    }
    if records.is_empty() {
        println!(
            "{}",
            if refunds_only {
                "no refund is due"
            } else {
                "no payment taken"
            }
        );
    }
    for r in &records {
        let amount = r.amount();
        println!(
            "{:<24} {:<28} {:>10}.{:02} {} {:<10} {:<9} {}",
            r.order_id,
            r.payment_id,
            amount / 100,
            amount % 100,
            r.currency,
            r.status,
            r.reason,
            format_instant_ms(r.ms.parse().unwrap_or(0))
        );
    }
    Ok(ExitCode::SUCCESS)
}
