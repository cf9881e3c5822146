//! The AWS side of the S3 Tables document on one endpoint (`peers/fronts.py aws`), for
//! SeaweedFS's catalog: what an AWS connection's `ENDPOINT` (STS and S3) points at.
//!
//! - STS: moto decides, as AWS would, whether a role may be assumed (signature, the
//!   caller's IAM policy, the trust policy's `sts:ExternalId` condition; a missing
//!   ExternalId is denied by the front, as in [`crate::Moto`]'s strict front). A session it
//!   allows is minted by SeaweedFS's STS instead (its role [`SeaweedFs::role_arn`]), so
//!   SeaweedFS's catalog and S3 accept it; its table bucket must then let every principal
//!   in ([`SeaweedFs::allow_table_bucket_to_all_principals`]).
//! - S3: everything else goes to SeaweedFS's S3 unchanged (Host header included, so SigV4
//!   signatures hold).
//!
//! ```no_run
//! let sw = floe_testkit::SeaweedFs::start();
//! sw.allow_table_bucket_to_all_principals();
//! let moto = floe_testkit::Moto::start();
//! let role = moto.create_role_with_external_id("ext-1");
//! let front = floe_testkit::AwsFront::start(&moto, &sw, None);
//! // CREATE CONNECTION ... TO AWS (ASSUME ROLE ARN = role.role_arn, ENDPOINT = front.url())
//! ```

use serde_json::{Value, json};

use crate::http;
use crate::moto::Moto;
use crate::process::{PeerProcess, launch_with_retry, start_front};
use crate::seaweedfs::{REGION, SeaweedFs};

/// A running AWS front. Killed when dropped.
pub struct AwsFront {
    process: PeerProcess,
    port: u16,
    _dir: tempfile::TempDir,
}

impl AwsFront {
    /// Starts the front for `moto` (roles, trust policies) and `seaweedfs` (sessions, S3)
    /// on `port` (a free one when `None`). Both must outlive it.
    pub fn start(moto: &Moto, seaweedfs: &SeaweedFs, port: Option<u16>) -> AwsFront {
        launch_with_retry(|| Self::try_start(moto, seaweedfs, port))
    }

    fn try_start(
        moto: &Moto,
        sw: &SeaweedFs,
        port: Option<u16>,
    ) -> Result<AwsFront, (String, bool)> {
        let dir = tempfile::Builder::new()
            .prefix("floe-aws-front-")
            .tempdir()
            .expect("temp dir");
        let port = port.unwrap_or_else(crate::free_port);
        let process = start_front(
            "aws",
            "aws-front",
            &json!({
                "port": port,
                "upstream": moto.endpoint(),
                "s3_upstream": sw.s3_endpoint(),
                "mint": {
                    "endpoint": sw.sts_endpoint(),
                    "access_key": sw.access_key(),
                    "secret_key": sw.secret_key(),
                    "region": REGION,
                    "role_arn": sw.role_arn(),
                },
            }),
            dir.path(),
            &format!("http://127.0.0.1:{port}/_testkit/requests"),
        )?;
        Ok(AwsFront {
            process,
            port,
            _dir: dir,
        })
    }

    /// `http://127.0.0.1:P`: STS and S3.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every `AssumeRole` the front received: `{"params", "signed", "denied_by_front",
    /// "minted"}`.
    pub fn requests(&self) -> Vec<Value> {
        http::get(&format!("{}/_testkit/requests", self.url()))
            .send()
            .expect("aws front requests")
            .json()
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }
}
