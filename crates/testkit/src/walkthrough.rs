//! The README's walk-through of the reference documents ("Connecting to real catalogs"),
//! which runs against the local peers of `scripts/peers`: its fenced `sql` and `sh`
//! blocks, in order. `scripts/peers start` prints them with the ports it chose, and
//! floe-server's end-to-end test replays them, so the README cannot drift from what runs.

/// The section's heading in `README.md`.
pub const SECTION: &str = "### Connecting to real catalogs";

/// The ports the README names, which `scripts/peers` takes when they are free.
pub const DEFAULT_PORTS: PeerPorts = PeerPorts {
    catalog: 8181,
    aws: 8334,
    unity: 8080,
};

/// The ports of the peers the walk-through talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerPorts {
    /// SeaweedFS's Iceberg REST catalog (S3 Tables and plain REST).
    pub catalog: u16,
    /// The AWS front: STS (moto decides, SeaweedFS mints) and S3.
    pub aws: u16,
    /// The Unity-Catalog-shaped front (REST catalog and OAuth2 token endpoint).
    pub unity: u16,
}

/// What a block is run with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// ```` ```sql ````: statements for psql.
    Sql,
    /// ```` ```sh ````: commands for a shell, one a line.
    Shell,
}

/// A fenced block of the walk-through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub kind: BlockKind,
    /// The block's lines, each ending with a newline.
    pub text: String,
}

/// The `sql` and `sh` blocks of the walk-through section of `readme`, in order. Other
/// fenced blocks and indented code are prose (e.g. the commands that restart floe).
pub fn blocks(readme: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut in_section = false;
    let mut open: Option<(Option<BlockKind>, String)> = None;
    for line in readme.lines() {
        if let Some((kind, text)) = &mut open {
            if line.trim_start().starts_with("```") {
                if let Some(kind) = *kind {
                    blocks.push(Block {
                        kind,
                        text: std::mem::take(text),
                    });
                }
                open = None;
            } else {
                text.push_str(line);
                text.push('\n');
            }
            continue;
        }
        if line.starts_with('#') {
            in_section = line.trim_end() == SECTION;
            continue;
        }
        if let Some(info) = line.trim_start().strip_prefix("```")
            && in_section
        {
            let kind = match info.trim() {
                "sql" => Some(BlockKind::Sql),
                "sh" => Some(BlockKind::Shell),
                _ => None,
            };
            open = Some((kind, String::new()));
        } else if line.trim_start().starts_with("```") {
            open = Some((None, String::new()));
        }
    }
    blocks
}

/// `text` with the README's local URLs (`http://127.0.0.1:<default port>`) moved to
/// `ports`.
pub fn with_ports(text: &str, ports: PeerPorts) -> String {
    let mut text = text.to_string();
    for (default, port) in [
        (DEFAULT_PORTS.catalog, ports.catalog),
        (DEFAULT_PORTS.aws, ports.aws),
        (DEFAULT_PORTS.unity, ports.unity),
    ] {
        text = text.replace(
            &format!("http://127.0.0.1:{default}"),
            &format!("http://127.0.0.1:{port}"),
        );
    }
    text
}
