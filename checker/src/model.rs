//! What one S3 key promises: a register that holds an object (named by the
//! unique value written into it) or nothing, with AWS's conditional writes.
//! Each step says whether an operation could have returned what it did from
//! a given state, and what state it leaves.

use crate::history::{Op, Outcome, Value};

/// The object at a key, if any.
pub type State = Option<Value>;

/// The state after `op` returned `outcome` from `state`, or None when no
/// object at the key could have given that answer. An [`Outcome::Unknown`]
/// operation is taken as having happened here; that it may not have
/// happened at all is the checker's concern.
pub fn step(state: State, op: Op, outcome: Outcome) -> Option<State> {
    use Outcome::*;
    match (op, outcome) {
        (Op::Get | Op::List | Op::ListVersions, Read { value }) => {
            (value == state).then_some(state)
        }
        (Op::Get | Op::List | Op::ListVersions, Unknown) => Some(state),
        (Op::Put { value }, Done | Unknown) => Some(Some(value)),
        (Op::Delete, Done | Unknown) => Some(None),
        (Op::PutIfAbsent { value }, Done) => state.is_none().then_some(Some(value)),
        (Op::PutIfAbsent { .. }, PreconditionFailed) => state.is_some().then_some(state),
        (Op::PutIfAbsent { value }, Unknown) => Some(state.or(Some(value))),
        (Op::PutIfMatch { expected, value }, Done) => {
            (state == Some(expected)).then_some(Some(value))
        }
        (Op::PutIfMatch { expected, .. }, PreconditionFailed) => {
            (state.is_some() && state != Some(expected)).then_some(state)
        }
        (Op::PutIfMatch { .. }, NotFound) => state.is_none().then_some(state),
        (Op::PutIfMatch { expected, value }, Unknown) => Some(if state == Some(expected) {
            Some(value)
        } else {
            state
        }),
        (_, Refused) | (Op::GetVersion, _) => Some(state),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Outcome::*;

    #[test]
    fn steps_follow_aws() {
        let put = Op::Put { value: 7 };
        assert_eq!(step(None, put, Done), Some(Some(7)));
        assert_eq!(
            step(Some(1), Op::Get, Read { value: Some(1) }),
            Some(Some(1))
        );
        assert_eq!(step(Some(1), Op::Get, Read { value: Some(2) }), None);
        assert_eq!(step(None, Op::Get, Read { value: None }), Some(None));
        assert_eq!(step(Some(1), Op::List, Read { value: None }), None);
        assert_eq!(
            step(Some(1), Op::ListVersions, Read { value: Some(1) }),
            Some(Some(1))
        );
        assert_eq!(step(Some(1), Op::Delete, Done), Some(None));
        let absent = Op::PutIfAbsent { value: 8 };
        assert_eq!(step(None, absent, Done), Some(Some(8)));
        assert_eq!(step(Some(1), absent, Done), None, "two winners");
        assert_eq!(step(Some(1), absent, PreconditionFailed), Some(Some(1)));
        assert_eq!(step(None, absent, PreconditionFailed), None);
        assert_eq!(step(Some(1), absent, Unknown), Some(Some(1)));
        let matching = Op::PutIfMatch {
            expected: 1,
            value: 9,
        };
        assert_eq!(step(Some(1), matching, Done), Some(Some(9)));
        assert_eq!(step(Some(2), matching, Done), None);
        assert_eq!(step(Some(2), matching, PreconditionFailed), Some(Some(2)));
        assert_eq!(step(Some(1), matching, PreconditionFailed), None);
        assert_eq!(step(None, matching, NotFound), Some(None));
        assert_eq!(step(Some(2), matching, NotFound), None);
        assert_eq!(step(Some(1), matching, Refused), Some(Some(1)));
        assert_eq!(step(None, put, Refused), Some(None));
        assert_eq!(step(Some(1), put, PreconditionFailed), None);
    }
}
