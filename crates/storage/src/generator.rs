//! Materialize's demo load generators, as pure functions of the tick number:
//! a restarted generator resumes at the tick after the last one it wrote
//! and produces exactly the rows it would have produced without the restart.

use floe_repr::{Datum, Row};

/// Rows for one output of a generator at one tick.
pub type OutputRows = Vec<(&'static str, Vec<Row>)>;

/// COUNTER: tick `n` (from 1) emits the row `(n)`.
pub fn counter_tick(tick: u64) -> OutputRows {
    vec![("counter", vec![vec![Datum::Int64(to_i64(tick))]])]
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A small deterministic mixer (splitmix64), so rows depend only on the tick.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

const ORGANIZATIONS: &[&str] = &[
    "Acme Corp",
    "Globex",
    "Initech",
    "Umbrella",
    "Hooli",
    "Vandelay Industries",
    "Stark Industries",
    "Wayne Enterprises",
    "Tyrell Corp",
    "Soylent",
];
const FIRST_NAMES: &[&str] = &[
    "Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy",
];
const ITEMS: &[&str] = &[
    "Signed Memorabilia",
    "City Bar Crawl",
    "Best Pizza in Town",
    "Gift Basket",
    "Custom Art",
];
/// Users per organization.
const USERS_PER_ORGANIZATION: u64 = 10;
/// How long an auction runs after the tick that opens it, in milliseconds.
const AUCTION_DURATION_MS: u64 = 10_000;

fn users() -> u64 {
    ORGANIZATIONS.len() as u64 * USERS_PER_ORGANIZATION
}

/// AUCTION: tick 1 also writes the static organizations, users and accounts;
/// every tick opens auction `tick` and places bids on it. `now_ms` is the
/// wall clock of the tick (auction end and bid times).
pub fn auction_tick(tick: u64, now_ms: u64) -> OutputRows {
    let mut organizations = Vec::new();
    let mut user_rows = Vec::new();
    let mut accounts = Vec::new();
    if tick == 1 {
        for (index, name) in ORGANIZATIONS.iter().enumerate() {
            let org_id = index as u64 + 1;
            organizations.push(vec![
                Datum::Int64(to_i64(org_id)),
                Datum::Text(name.to_string()),
            ]);
            for member in 0..USERS_PER_ORGANIZATION {
                let user_id = index as u64 * USERS_PER_ORGANIZATION + member + 1;
                let first = FIRST_NAMES[(mix(user_id) % FIRST_NAMES.len() as u64) as usize];
                user_rows.push(vec![
                    Datum::Int64(to_i64(user_id)),
                    Datum::Int64(to_i64(org_id)),
                    Datum::Text(format!("{first} {user_id}")),
                ]);
            }
            accounts.push(vec![
                Datum::Int64(to_i64(org_id)),
                Datum::Int64(to_i64(org_id)),
                Datum::Int64(to_i64(mix(org_id) % 10_000)),
            ]);
        }
    }
    let seed = mix(tick);
    let seller = seed % users() + 1;
    let item = ITEMS[(seed >> 8) as usize % ITEMS.len()];
    let end_micros = to_i64(now_ms.saturating_add(AUCTION_DURATION_MS)).saturating_mul(1000);
    let auctions = vec![vec![
        Datum::Int64(to_i64(tick)),
        Datum::Int64(to_i64(seller)),
        Datum::Text(item.to_string()),
        Datum::TimestampTz(end_micros),
    ]];
    // Between one and three bids per tick, ids derived from the tick.
    let bid_count = 1 + (seed >> 16) % 3;
    let mut bids = Vec::new();
    for n in 0..bid_count {
        let bid_seed = mix(seed ^ (n + 1));
        bids.push(vec![
            Datum::Int64(to_i64(tick * 3 + n)),
            Datum::Int64(to_i64(bid_seed % users() + 1)),
            Datum::Int64(to_i64(tick)),
            Datum::Int32(i32::try_from(1 + (bid_seed >> 20) % 100).unwrap_or(1)),
            Datum::TimestampTz(to_i64(now_ms).saturating_mul(1000)),
        ]);
    }
    vec![
        ("organizations", organizations),
        ("users", user_rows),
        ("accounts", accounts),
        ("auctions", auctions),
        ("bids", bids),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_deterministic_and_keys_unique() {
        assert_eq!(auction_tick(5, 1000), auction_tick(5, 1000));
        let mut bid_ids = std::collections::HashSet::new();
        for tick in 1..200 {
            for (output, rows) in auction_tick(tick, 0) {
                if output == "bids" {
                    for row in rows {
                        assert!(
                            bid_ids.insert(format!("{:?}", row[0])),
                            "bid ids are unique"
                        );
                    }
                }
            }
        }
        let first = auction_tick(1, 0);
        let users = first.iter().find(|(o, _)| *o == "users").unwrap();
        assert_eq!(users.1.len(), 100);
        assert!(
            auction_tick(2, 0)
                .iter()
                .find(|(o, _)| *o == "users")
                .unwrap()
                .1
                .is_empty()
        );
        assert_eq!(
            counter_tick(3),
            vec![("counter", vec![vec![Datum::Int64(3)]])]
        );
    }
}
