//! Random queries from a grammar of the constructs views maintain, over two
//! tables `t1(a, b, c)` and `t2(a, d, e)` (bigint, bigint, text) and, when given,
//! views defined earlier (views over views).
//!
//! Shared by floe-compute's randomized test (views against DataFusion's batch
//! answer) and the server's end-to-end test (views against floe's SELECT and
//! PostgreSQL), so that both draw from one grammar of the supported constructs:
//! projections and filters over scalar expressions, inner and outer joins,
//! GROUP BY with count/sum/avg/min/max/bool_and/bool_or/string_agg/
//! count(DISTINCT), DISTINCT, UNION/EXCEPT/INTERSECT, top-k, IN/EXISTS
//! subqueries, scalar subqueries and CTEs.

use rand::Rng;
use rand::rngs::StdRng;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Ty {
    Int,
    Text,
}

/// Something to select from: a table or a derived table, with its columns.
#[derive(Clone, Debug)]
pub struct Source {
    pub sql: String,
    pub columns: Vec<(String, Ty)>,
}

/// A query and its output columns' types.
#[derive(Clone, Debug)]
pub struct Query {
    pub sql: String,
    pub columns: Vec<Ty>,
}

pub struct Gen<'a> {
    pub rng: &'a mut StdRng,
    next_alias: usize,
    /// Views defined earlier that queries may select from besides the tables.
    relations: Vec<Source>,
    /// Only what PostgreSQL also runs: its FULL JOIN needs a condition that is an
    /// equality of a column on each side and nothing else (merge- or hash-joinable).
    postgres: bool,
    /// Whether integer expressions may divide (by zero for some rows: the grammar's
    /// run-time error).
    divisions: bool,
}

impl Source {
    /// The base table `t1(a, b, c)` or `t2(a, d, e)`.
    pub fn table(name: &str) -> Source {
        let (i, t) = if name == "t1" { ("b", "c") } else { ("d", "e") };
        Source {
            sql: name.to_string(),
            columns: vec![
                ("a".into(), Ty::Int),
                (i.into(), Ty::Int),
                (t.into(), Ty::Text),
            ],
        }
    }

    /// A view named `name` over `query`: its columns are the query's `c0, c1, ...`.
    pub fn view(name: &str, query: &Query) -> Source {
        Source {
            sql: name.to_string(),
            columns: numbered_columns(&query.columns),
        }
    }
}

/// The columns `c0, c1, ...` every query of the grammar names its outputs.
fn numbered_columns(types: &[Ty]) -> Vec<(String, Ty)> {
    types
        .iter()
        .enumerate()
        .map(|(i, ty)| (format!("c{i}"), *ty))
        .collect()
}

impl<'a> Gen<'a> {
    pub fn new(rng: &'a mut StdRng) -> Gen<'a> {
        Gen {
            rng,
            next_alias: 0,
            relations: Vec::new(),
            postgres: false,
            divisions: true,
        }
    }

    /// Draws queries that never divide, so never fail at run time.
    pub fn without_division(mut self) -> Gen<'a> {
        self.divisions = false;
        self
    }

    /// Draws only queries PostgreSQL runs too (it is the oracle of the server's test).
    pub fn postgres(mut self) -> Gen<'a> {
        self.postgres = true;
        self
    }

    /// A generator whose queries may also select from `relations` (views).
    pub fn with_relations(rng: &'a mut StdRng, relations: Vec<Source>) -> Gen<'a> {
        Gen {
            relations,
            ..Gen::new(rng)
        }
    }

    fn alias(&mut self) -> String {
        self.next_alias += 1;
        format!("s{}", self.next_alias)
    }

    fn pick<'b, T>(&mut self, items: &'b [T]) -> &'b T {
        &items[self.rng.random_range(0..items.len())]
    }

    fn chance(&mut self, percent: u32) -> bool {
        self.rng.random_range(0..100) < percent
    }

    fn columns_of<'b>(&mut self, source: &'b Source, ty: Ty) -> Vec<&'b String> {
        source
            .columns
            .iter()
            .filter(|(_, t)| *t == ty)
            .map(|(n, _)| n)
            .collect()
    }

    fn column(&mut self, source: &Source, qualifier: &str, ty: Ty) -> Option<String> {
        let columns = self.columns_of(source, ty);
        if columns.is_empty() {
            return None;
        }
        let name = self.pick(&columns).to_string();
        Some(format!("{qualifier}.{name}"))
    }

    /// A source: a base table, a view given to the generator, or (with depth
    /// left) a derived table.
    fn source(&mut self, depth: usize) -> Source {
        if depth > 0 && self.chance(40) {
            let inner = self.query(depth - 1);
            return Source {
                sql: format!("({})", inner.sql),
                columns: numbered_columns(&inner.columns),
            };
        }
        if !self.relations.is_empty() && self.chance(40) {
            let at = self.rng.random_range(0..self.relations.len());
            return self.relations[at].clone();
        }
        if self.chance(50) {
            Source::table("t1")
        } else {
            Source::table("t2")
        }
    }

    /// An integer expression over `source` (qualified by `q`).
    pub fn int_expr(&mut self, source: &Source, q: &str, depth: usize) -> String {
        let Some(col) = self.column(source, q, Ty::Int) else {
            // Not a bare literal: GROUP BY 2 would mean the second column.
            return format!("({} + 0)", self.rng.random_range(-2..5));
        };
        if depth == 0 {
            return col;
        }
        let other = self.int_expr(source, q, depth - 1);
        match self.rng.random_range(0..10) {
            0 => format!("({col} + {other})"),
            1 => format!("({col} * 2 - {other})"),
            2 => format!("coalesce({col}, {})", self.rng.random_range(-1..3)),
            3 => {
                let pred = self.predicate(source, q, depth - 1);
                format!("CASE WHEN {pred} THEN {col} ELSE {other} END")
            }
            4 => match self.column(source, q, Ty::Text) {
                Some(text) => format!("length({text})"),
                None => col,
            },
            5 => format!("abs({col})"),
            6 => format!("({col} % 3)"),
            // Division by zero happens for some rows: an error in the view.
            7 if self.divisions => {
                format!("({other} / ({col} - {}))", self.rng.random_range(0..3))
            }
            _ => col,
        }
    }

    pub fn text_expr(&mut self, source: &Source, q: &str, depth: usize) -> String {
        let Some(col) = self.column(source, q, Ty::Text) else {
            // Not a bare literal: PostgreSQL refuses a text constant in GROUP BY.
            return "('k' || '')".into();
        };
        if depth == 0 {
            return col;
        }
        match self.rng.random_range(0..6) {
            0 => format!("({col} || 'z')"),
            1 => format!("upper({col})"),
            2 => format!("coalesce({col}, 'n')"),
            3 => {
                let pred = self.predicate(source, q, depth - 1);
                format!("CASE WHEN {pred} THEN {col} ELSE 'w' END")
            }
            _ => col,
        }
    }

    pub fn predicate(&mut self, source: &Source, q: &str, depth: usize) -> String {
        let choice = self.rng.random_range(0..if depth > 0 { 9 } else { 6 });
        match choice {
            0 | 1 => {
                let left = self.int_expr(source, q, 0);
                let op = *self.pick(&["<", "<=", "=", "<>", ">", ">="]);
                let right = if self.chance(50) {
                    self.int_expr(source, q, 0)
                } else {
                    format!("{}", self.rng.random_range(-1..5))
                };
                format!("{left} {op} {right}")
            }
            2 => format!("{} IS NULL", self.int_expr(source, q, 0)),
            3 => format!(
                "{} = '{}'",
                self.text_expr(source, q, 0),
                self.pick(&["x", "y", "xy"])
            ),
            4 => format!("{} LIKE 'x%'", self.text_expr(source, q, 0)),
            5 => format!("{} BETWEEN 0 AND 2", self.int_expr(source, q, 0)),
            6 => format!(
                "({} AND {})",
                self.predicate(source, q, depth - 1),
                self.predicate(source, q, depth - 1)
            ),
            7 => format!(
                "({} OR {})",
                self.predicate(source, q, depth - 1),
                self.predicate(source, q, depth - 1)
            ),
            _ => format!("NOT ({})", self.predicate(source, q, depth - 1)),
        }
    }

    fn expr(&mut self, source: &Source, q: &str, ty: Ty) -> String {
        match ty {
            Ty::Int => self.int_expr(source, q, 2),
            Ty::Text => self.text_expr(source, q, 1),
        }
    }

    /// A random query with at most `depth` levels of nesting.
    pub fn query(&mut self, depth: usize) -> Query {
        match self.rng.random_range(0..11) {
            0 | 1 => self.select(depth),
            2 | 3 => self.aggregate(depth),
            4 | 5 => self.join(depth),
            6 => self.set_operation(depth),
            7 => self.top_k(depth),
            8 => self.subquery(depth),
            9 => self.scalar_subquery(depth),
            _ => self.cte(depth),
        }
    }

    fn output(columns: Vec<(String, Ty)>) -> (String, Vec<Ty>) {
        let sql = columns
            .iter()
            .enumerate()
            .map(|(i, (e, _))| format!("{e} AS c{i}"))
            .collect::<Vec<_>>()
            .join(", ");
        (sql, columns.into_iter().map(|(_, t)| t).collect())
    }

    fn select(&mut self, depth: usize) -> Query {
        let source = self.source(depth);
        let q = self.alias();
        let width = self.rng.random_range(1..4);
        let columns: Vec<(String, Ty)> = (0..width)
            .map(|_| {
                let ty = if self.chance(65) { Ty::Int } else { Ty::Text };
                (self.expr(&source, &q, ty), ty)
            })
            .collect();
        let (list, types) = Self::output(columns);
        let distinct = if self.chance(20) { "DISTINCT " } else { "" };
        let filter = if self.chance(70) {
            format!(" WHERE {}", self.predicate(&source, &q, 2))
        } else {
            String::new()
        };
        Query {
            sql: format!(
                "SELECT {distinct}{list} FROM {}{filter}",
                source_sql(&source, &q)
            ),
            columns: types,
        }
    }

    fn aggregate(&mut self, depth: usize) -> Query {
        let source = self.source(depth);
        let q = self.alias();
        let mut columns = Vec::new();
        let global = self.chance(25);
        let mut keys = Vec::new();
        if !global {
            for _ in 0..self.rng.random_range(1..3) {
                let ty = if self.chance(60) { Ty::Int } else { Ty::Text };
                let key = match ty {
                    Ty::Int => {
                        let depth = if self.chance(70) { 0 } else { 1 };
                        self.int_expr(&source, &q, depth)
                    }
                    Ty::Text => self.text_expr(&source, &q, 0),
                };
                keys.push(key.clone());
                columns.push((key, ty));
            }
        }
        for _ in 0..self.rng.random_range(1..4) {
            columns.push(self.aggregate_call(&source, &q));
        }
        let (list, types) = Self::output(columns);
        let filter = if self.chance(40) {
            format!(" WHERE {}", self.predicate(&source, &q, 1))
        } else {
            String::new()
        };
        let group = if keys.is_empty() {
            String::new()
        } else {
            format!(" GROUP BY {}", keys.join(", "))
        };
        let having = if !keys.is_empty() && self.chance(20) {
            " HAVING count(*) > 1".to_string()
        } else {
            String::new()
        };
        Query {
            sql: format!(
                "SELECT {list} FROM {}{filter}{group}{having}",
                source_sql(&source, &q)
            ),
            columns: types,
        }
    }

    fn aggregate_call(&mut self, source: &Source, q: &str) -> (String, Ty) {
        let depth = if self.chance(70) { 0 } else { 1 };
        let int = self.int_expr(source, q, depth);
        let text = self.text_expr(source, q, 0);
        match self.rng.random_range(0..12) {
            0 => ("count(*)".into(), Ty::Int),
            1 => (format!("count({int})"), Ty::Int),
            2 => (format!("sum({int})"), Ty::Int),
            3 => (format!("min({int})"), Ty::Int),
            4 => (format!("max({int})"), Ty::Int),
            5 => (format!("max({text})"), Ty::Text),
            6 => (format!("min({text})"), Ty::Text),
            7 => (format!("count(DISTINCT {int})"), Ty::Int),
            8 => {
                let pred = self.predicate(source, q, 0);
                (
                    format!("CASE WHEN bool_and({pred}) THEN 1 ELSE 0 END"),
                    Ty::Int,
                )
            }
            9 => {
                let pred = self.predicate(source, q, 0);
                (
                    format!("CASE WHEN bool_or({pred}) THEN 1 ELSE 0 END"),
                    Ty::Int,
                )
            }
            10 => (format!("string_agg({text}, ',' ORDER BY {text})"), Ty::Text),
            _ => (format!("round(avg({int}) * 1000)"), Ty::Int),
        }
    }

    fn join(&mut self, depth: usize) -> Query {
        let left = self.source(depth);
        let right = self.source(depth);
        let (l, r) = (self.alias(), self.alias());
        let mut kind = *self.pick(&["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "CROSS JOIN"]);
        let on = if kind == "CROSS JOIN" {
            String::new()
        } else {
            let lk = self.column(&left, &l, Ty::Int);
            let rk = self.column(&right, &r, Ty::Int);
            let postgres_full = self.postgres && kind == "FULL JOIN";
            if postgres_full && (lk.is_none() || rk.is_none()) {
                kind = "LEFT JOIN";
            }
            let (lk, rk) = (
                lk.unwrap_or_else(|| "0".into()),
                rk.unwrap_or_else(|| "0".into()),
            );
            let mut on = format!(" ON {lk} = {rk}");
            if !postgres_full && self.chance(40) {
                let li = self.int_expr(&left, &l, 0);
                let ri = self.int_expr(&right, &r, 0);
                on.push_str(&format!(" AND {li} <= {ri}"));
            }
            on
        };
        let mut columns = Vec::new();
        for _ in 0..self.rng.random_range(1..4) {
            let (source, q) = if self.chance(50) {
                (&left, &l)
            } else {
                (&right, &r)
            };
            let ty = if self.chance(65) { Ty::Int } else { Ty::Text };
            let e = match ty {
                Ty::Int => self.int_expr(source, q, 0),
                Ty::Text => self.text_expr(source, q, 0),
            };
            columns.push((e, ty));
        }
        let (list, types) = Self::output(columns);
        let filter = if kind == "CROSS JOIN" || self.chance(30) {
            let li = self.int_expr(&left, &l, 0);
            let ri = self.int_expr(&right, &r, 0);
            format!(" WHERE {li} < {ri} + 2")
        } else {
            String::new()
        };
        Query {
            sql: format!(
                "SELECT {list} FROM {} {kind} {}{on}{filter}",
                source_sql(&left, &l),
                source_sql(&right, &r)
            ),
            columns: types,
        }
    }

    /// Both sides project `(int, text)`.
    fn side(&mut self, depth: usize) -> String {
        let source = self.source(depth);
        let q = self.alias();
        let i = self.int_expr(&source, &q, 1);
        let t = self.text_expr(&source, &q, 0);
        let filter = if self.chance(50) {
            format!(" WHERE {}", self.predicate(&source, &q, 1))
        } else {
            String::new()
        };
        format!(
            "SELECT {i} AS c0, {t} AS c1 FROM {}{filter}",
            source_sql(&source, &q)
        )
    }

    fn set_operation(&mut self, depth: usize) -> Query {
        let op = *self.pick(&["UNION", "UNION ALL", "EXCEPT", "INTERSECT"]);
        let (left, right) = (self.side(depth), self.side(depth));
        Query {
            sql: format!("{left} {op} {right}"),
            columns: vec![Ty::Int, Ty::Text],
        }
    }

    fn top_k(&mut self, depth: usize) -> Query {
        let inner = self.select(depth);
        let alias = self.alias();
        let order: Vec<String> = (0..inner.columns.len())
            .map(|i| {
                let direction = *self.pick(&[
                    "ASC NULLS FIRST",
                    "ASC NULLS LAST",
                    "DESC NULLS FIRST",
                    "DESC NULLS LAST",
                ]);
                format!("{alias}.c{i} {direction}")
            })
            .collect();
        let limit = self.rng.random_range(0..6);
        let offset = if self.chance(30) {
            format!(" OFFSET {}", self.rng.random_range(1..4))
        } else {
            String::new()
        };
        let list = (0..inner.columns.len())
            .map(|i| format!("{alias}.c{i} AS c{i}"))
            .collect::<Vec<_>>()
            .join(", ");
        Query {
            sql: format!(
                "SELECT {list} FROM ({}) AS {alias} ORDER BY {} LIMIT {limit}{offset}",
                inner.sql,
                order.join(", ")
            ),
            columns: inner.columns,
        }
    }

    /// An outer source and the inner one of a subquery, with their aliases and an
    /// integer key of each.
    fn correlated(&mut self, depth: usize) -> Correlated {
        let outer = self.source(depth);
        let mut inner = self.source(0);
        // The inner side is correlated on a column of its own: a condition on the outer
        // row alone (`0 = outer.c`) is a subquery no engine turns into a join.
        if !inner.columns.iter().any(|(_, ty)| *ty == Ty::Int) {
            inner = Source::table("t1");
        }
        let (o, i) = (self.alias(), self.alias());
        let ok = self
            .column(&outer, &o, Ty::Int)
            .unwrap_or_else(|| "0".into());
        let ik = self
            .column(&inner, &i, Ty::Int)
            .unwrap_or_else(|| "0".into());
        Correlated {
            outer,
            inner,
            o,
            i,
            ok,
            ik,
        }
    }

    fn subquery(&mut self, depth: usize) -> Query {
        let Correlated {
            outer,
            inner,
            o,
            i,
            ok,
            ik,
        } = self.correlated(depth);
        let inner_filter = self.predicate(&inner, &i, 0);
        let condition = match self.rng.random_range(0..4) {
            0 => format!(
                "{ok} IN (SELECT {ik} FROM {} WHERE {inner_filter})",
                source_sql(&inner, &i)
            ),
            1 => format!(
                "{ok} NOT IN (SELECT {ik} FROM {} WHERE {inner_filter})",
                source_sql(&inner, &i)
            ),
            2 => format!(
                "EXISTS (SELECT 1 FROM {} WHERE {ik} = {ok} AND {inner_filter})",
                source_sql(&inner, &i)
            ),
            _ => format!(
                "NOT EXISTS (SELECT 1 FROM {} WHERE {ik} = {ok} AND {inner_filter})",
                source_sql(&inner, &i)
            ),
        };
        let int = self.int_expr(&outer, &o, 1);
        let text = self.text_expr(&outer, &o, 0);
        Query {
            sql: format!(
                "SELECT {int} AS c0, {text} AS c1 FROM {} WHERE {condition}",
                source_sql(&outer, &o)
            ),
            columns: vec![Ty::Int, Ty::Text],
        }
    }

    fn scalar_subquery(&mut self, depth: usize) -> Query {
        let Correlated {
            outer,
            inner,
            o,
            i,
            ok,
            ik,
        } = self.correlated(depth);
        let value = self.int_expr(&inner, &i, 0);
        let aggregate = *self.pick(&["max", "min", "sum", "count"]);
        Query {
            sql: format!(
                "SELECT {ok} AS c0, (SELECT {aggregate}({value}) FROM {} WHERE {ik} = {ok}) AS c1 FROM {}",
                source_sql(&inner, &i),
                source_sql(&outer, &o)
            ),
            columns: vec![Ty::Int, Ty::Int],
        }
    }

    fn cte(&mut self, depth: usize) -> Query {
        let inner = self.query(depth.saturating_sub(1));
        let Some(key) = inner.columns.iter().position(|t| *t == Ty::Int) else {
            return Query {
                sql: format!("WITH w AS ({}) SELECT * FROM w", inner.sql),
                columns: inner.columns,
            };
        };
        Query {
            sql: format!(
                "WITH w AS ({}) SELECT x.c{key} AS c0, count(*) AS c1 FROM w x JOIN w y ON x.c{key} = y.c{key} GROUP BY x.c{key}",
                inner.sql
            ),
            columns: vec![Ty::Int, Ty::Int],
        }
    }
}

/// See [`Gen::correlated`].
struct Correlated {
    outer: Source,
    inner: Source,
    /// The aliases of the outer and inner source.
    o: String,
    i: String,
    /// An integer column of each (`0` when it has none).
    ok: String,
    ik: String,
}

fn source_sql(source: &Source, alias: &str) -> String {
    format!("{} AS {alias}", source.sql)
}

/// The values of a random row of `t1` or `t2` (`a`, then `b` or `d`, then `c` or
/// `e`): small domains so that joins and groups meet, NULLs among them.
pub fn random_values(rng: &mut StdRng) -> (Option<i64>, Option<i64>, Option<&'static str>) {
    let mut int = |range: std::ops::Range<i64>| {
        (rng.random_range(0..10) != 0).then(|| rng.random_range(range))
    };
    let (a, b) = (int(0..4), int(-2..6));
    let text = match rng.random_range(0..6) {
        0 => None,
        1 => Some("x"),
        2 => Some("y"),
        3 => Some("xy"),
        4 => Some("z"),
        _ => Some(""),
    };
    (a, b, text)
}

/// The seeds a randomized test runs: `first..end` from the environment variable
/// `variable` (to widen the search or rerun a failure), else `default`.
pub fn seeds(variable: &str, default: std::ops::Range<u64>) -> std::ops::Range<u64> {
    std::env::var(variable)
        .ok()
        .and_then(|s| {
            let (a, b) = s.split_once("..")?;
            Some(a.parse().ok()?..b.parse().ok()?)
        })
        .unwrap_or(default)
}
