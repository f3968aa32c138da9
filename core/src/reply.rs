//! Reading Redis replies the scripts and commands build: strings and integers, whichever
//! way Redis spelled them.

use redis::Value;

/// A string reply (or an integer, as text).
pub fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

/// An integer reply (or a string holding one); nil reads as 0.
pub fn int(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Int(i) => Some(*i),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        Value::Nil => Some(0),
        _ => None,
    }
}
