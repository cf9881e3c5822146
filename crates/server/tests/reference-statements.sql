-- The statements of ../shared/reference/, in order, with local endpoints in
-- place of AWS and Databricks, and validation off (no peers run here).

-- AWS S3 Tables, step 2.
CREATE CONNECTION aws_connection TO AWS (
    ASSUME ROLE ARN = 'arn:aws:iam::000000000000:role/floe-sink',
    REGION = 'us-east-1'
);

SELECT external_id
FROM mz_internal.mz_aws_connections awsc
JOIN mz_connections c ON awsc.id = c.id
WHERE c.name = 'aws_connection'
AND awsc.assume_role_arn = 'arn:aws:iam::000000000000:role/floe-sink';

-- Step 4.
CREATE CONNECTION iceberg_catalog_connection TO ICEBERG CATALOG (
    CATALOG TYPE = 's3tablesrest',
    URL = 'http://127.0.0.1:8181/iceberg',
    WAREHOUSE = 'arn:aws:s3tables:us-east-1:000000000000:bucket/iceberg-tables',
    AWS CONNECTION = aws_connection
) WITH (VALIDATE = false);

CREATE CLUSTER sink_cluster (SIZE = '25cc', REPLICATION FACTOR = 1);
CREATE TABLE my_table (id bigint PRIMARY KEY, name text, amount numeric(10,2));

CREATE SINK upsert_sink
  IN CLUSTER sink_cluster
  FROM my_table
  INTO ICEBERG CATALOG CONNECTION iceberg_catalog_connection (
    NAMESPACE = 'my_namespace',
    TABLE = 'my_upsert_table'
  )
  KEY (id)
  MODE UPSERT
  WITH (COMMIT INTERVAL = '1m');

CREATE SINK append_sink
  IN CLUSTER sink_cluster
  FROM my_table
  INTO ICEBERG CATALOG CONNECTION iceberg_catalog_connection (
    NAMESPACE = 'my_namespace',
    TABLE = 'my_append_table'
  )
  MODE APPEND
  WITH (COMMIT INTERVAL = '1m');

ALTER SINK upsert_sink SET (COMMIT INTERVAL = '1m');
ALTER SINK append_sink SET (COMMIT INTERVAL = '5m');

SELECT o.name, l.lag
FROM mz_internal.mz_wallclock_global_lag AS l
JOIN mz_catalog.mz_objects AS o ON o.id = l.object_id
WHERE o.name IN ('upsert_sink', 'my_table');

ALTER CLUSTER sink_cluster SET (REPLICATION FACTOR = 0);
ALTER CLUSTER sink_cluster SET (REPLICATION FACTOR = 1);

CREATE CLUSTER unmanaged_cluster REPLICAS (r1 (SIZE = '25cc'));
DROP CLUSTER REPLICA unmanaged_cluster.r1;
CREATE CLUSTER REPLICA unmanaged_cluster.r1 (SIZE = '25cc');

-- Databricks Unity Catalog.
CREATE SECRET databricks_oauth
  AS 'client-id:client-secret';

CREATE CONNECTION unity_catalog_connection TO ICEBERG CATALOG (
    CATALOG TYPE = 'rest',
    URL = 'http://127.0.0.1:8080/api/2.1/unity-catalog/iceberg-rest',
    WAREHOUSE = 'my_catalog',
    CREDENTIAL = SECRET databricks_oauth,
    OAUTH2 SERVER URL = 'http://127.0.0.1:8080/oidc/v1/token',
    SCOPE = 'all-apis',
    ACCESS DELEGATION = 'vended-credentials'
) WITH (VALIDATE = false);

CREATE SINK unity_sink
  IN CLUSTER sink_cluster
  FROM my_table
  INTO ICEBERG CATALOG CONNECTION unity_catalog_connection (
    NAMESPACE = 'my_schema',
    TABLE = 'my_unity_table'
  )
  MODE APPEND
  WITH (COMMIT INTERVAL = '1m');

ALTER SECRET databricks_oauth AS 'client-id:new-client-secret';

SELECT name, error FROM mz_internal.mz_sink_statuses WHERE name = 'unity_sink';
