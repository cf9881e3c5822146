-- floe's quickstart: run once on a new data directory by `floe --quickstart`.
-- A load generator and a table feed an upsert sink and an append sink into
-- floe's embedded Iceberg catalog (SQLite + a file:// warehouse under the
-- data directory), which DuckDB, pyiceberg or any engine can read.

CREATE CONNECTION quickstart_catalog TO ICEBERG CATALOG (CATALOG TYPE = 'local');

CREATE SOURCE auction_house FROM LOAD GENERATOR AUCTION (TICK INTERVAL = '1s') FOR ALL TABLES;

CREATE TABLE orders (
    id bigint PRIMARY KEY,
    customer text NOT NULL,
    amount numeric(10,2),
    status text NOT NULL DEFAULT 'new'
);

INSERT INTO orders (id, customer, amount) VALUES (1, 'alice', 10.50), (2, 'bob', 99.00), (3, 'carol', 5.25);

-- Every bid ever placed, as a change log with _mz_diff and _mz_timestamp.
CREATE SINK bids_sink FROM bids
  INTO ICEBERG CATALOG CONNECTION quickstart_catalog (NAMESPACE = 'quickstart', TABLE = 'bids')
  MODE APPEND
  WITH (COMMIT INTERVAL = '10s');

-- The current orders, one row per id, kept in step with UPDATE and DELETE.
CREATE SINK orders_sink FROM orders
  INTO ICEBERG CATALOG CONNECTION quickstart_catalog (NAMESPACE = 'quickstart', TABLE = 'orders')
  KEY (id)
  MODE UPSERT
  WITH (COMMIT INTERVAL = '10s');
