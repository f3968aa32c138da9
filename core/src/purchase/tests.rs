use super::*;

fn queued(user: &str, key: Option<&str>, ticket: Option<&str>, pass: Option<i64>) -> Queued {
    Queued {
        user: user.into(),
        quantity: 2,
        idempotency_key: key.map(Into::into),
        ticket: ticket.map(Into::into),
        pass_expires_ms: pass,
    }
}

#[test]
fn the_purchase_call_carries_every_key_and_each_purchase_in_order() {
    let keys = PartitionKeys::new("spring", 5);
    let batch = [
        queued("ann", None, None, None),
        queued("bob", Some("k-1"), None, None),
        queued("cy", Some("k-2"), Some("q17"), Some(1_800_000_000_000)),
    ];
    let mut args = vec![
        keys.part(),
        keys.buyers(),
        keys.holds(),
        keys.events(),
        keys.once(),
        keys.pass_log(),
        "spring".into(),
        "5".into(),
        keys.order_prefix(),
    ];
    for q in &batch {
        args.extend([
            q.user.clone(),
            q.quantity.to_string(),
            q.idempotency_key.clone().unwrap_or_default(),
            q.ticket.clone().unwrap_or_default(),
            q.pass_expires_ms.map(|t| t.to_string()).unwrap_or_default(),
        ]);
    }
    let (ks, rest) = args.split_at(6);
    let ks: Vec<&str> = ks.iter().map(String::as_str).collect();
    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
    assert_eq!(
        call(&keys, 5, "spring", &batch).get_packed_command(),
        scripts::call(&scripts::PURCHASE, &ks, &rest).get_packed_command()
    );
}

#[test]
fn each_purchase_of_a_call_gets_its_own_answer() {
    let s = |x: &str| redis::Value::BulkString(x.as_bytes().to_vec());
    let reply = redis::Value::Array(vec![
        s("held"),
        s("spring.5.9"),
        s("1800000000000"),
        s("dry"),
        s("0"),
        s(""),
        s("limit_reached"),
        s("2"),
        s(""),
    ]);
    let got = answers(reply, 3).expect("three answers");
    assert_eq!(
        got,
        [
            Ok(Answer::Held {
                order_id: "spring.5.9".into(),
                pay_by_ms: 1_800_000_000_000
            }),
            Ok(Answer::Dry),
            Ok(Answer::Refused(Refusal::LimitReached)),
        ]
    );
    let short = redis::Value::Array(vec![s("held"), s("spring.5.9"), s("1")]);
    assert!(
        answers(short, 2).is_err(),
        "an answer missing is an error for all"
    );
    let old = redis::Value::Array(vec![s("layout"), s("1"), s("")]);
    let e = answers(old, 1).expect("one answer").remove(0);
    assert!(
        matches!(&e, Err(Unreadable(m)) if m.contains("layout 1")),
        "{e:?}"
    );
}
