//! Deletion vectors: how format version 3 tables take position deletes.
//!
//! A deletion vector (DV) is a bitmap of the deleted row positions of one data file, kept
//! as a `deletion-vector-v1` blob in a Puffin file and tracked by a delete manifest entry
//! (content position deletes, format Puffin) naming the data file (`referenced_data_file`)
//! and the blob's place in the Puffin file (`content_offset`, `content_size_in_bytes`).
//! A snapshot holds at most one DV per data file, so a new one for a file that has one
//! holds both sets of positions, and the commit that adds it removes the old entry.
//!
//! floe writes the DVs of one commit into one Puffin file, a blob each: a commit touching
//! N data files then writes one small file, not N. Several manifest entries thus share a
//! path, so commits and compaction tell delete files apart by [`EntryKey`] (the path and
//! the blob's offset), never by path alone; expiry and orphan cleanup go by path, which
//! keeps a shared file while any entry still references it. The blob (Iceberg's Puffin
//! spec):
//!
//! ```text
//! length: u32 BE (of magic + bitmap) | magic D1 D3 39 64 | bitmap | CRC-32 of magic + bitmap: u32 BE
//! ```
//!
//! where the bitmap is Roaring's portable 64-bit serialization (`RoaringTreemap`'s own).

use iceberg::spec::{DataContentType, DataFile, DataFileBuilder, DataFileFormat, Struct};
use roaring::RoaringTreemap;

use crate::error::{ErrorKind, SinkError};
use crate::table::{LoadedTable, storage_error};

/// The magic bytes that open a `deletion-vector-v1` blob's bitmap.
pub(crate) const DV_MAGIC: [u8; 4] = [0xD1, 0xD3, 0x39, 0x64];
/// The magic bytes that open and close a Puffin file and its footer (`PFA1`).
const PUFFIN_MAGIC: [u8; 4] = [0x50, 0x46, 0x41, 0x31];
/// The blob type of a deletion vector.
const DV_BLOB_TYPE: &str = "deletion-vector-v1";
/// Iceberg's reserved field id of the row position (`_pos`), the field a DV is about.
const ROW_POSITION_FIELD_ID: i32 = i32::MAX - 2;

/// The `deletion-vector-v1` blob of `positions`.
pub(crate) fn encode_blob(positions: &RoaringTreemap) -> Result<Vec<u8>, SinkError> {
    let mut body = Vec::with_capacity(DV_MAGIC.len() + positions.serialized_size());
    body.extend_from_slice(&DV_MAGIC);
    positions
        .serialize_into(&mut body)
        .map_err(|err| SinkError::internal(format!("cannot serialize a deletion vector: {err}")))?;
    let length = u32::try_from(body.len())
        .map_err(|_| SinkError::internal("a deletion vector is larger than 4 GiB"))?;
    let mut blob = Vec::with_capacity(body.len() + 8);
    blob.extend_from_slice(&length.to_be_bytes());
    blob.extend_from_slice(&body);
    blob.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
    Ok(blob)
}

/// The positions of a `deletion-vector-v1` blob, or why the bytes are not one.
pub(crate) fn decode_blob(blob: &[u8]) -> Result<RoaringTreemap, String> {
    // Length, magic and CRC: 12 bytes around the bitmap.
    if blob.len() < 12 {
        return Err(format!(
            "{} bytes are too short for a deletion vector",
            blob.len()
        ));
    }
    let (length, rest) = blob.split_at(4);
    let length = u32::from_be_bytes([length[0], length[1], length[2], length[3]]) as usize;
    if length.checked_add(8) != Some(blob.len()) {
        return Err(format!(
            "the blob's length field says {length} bytes but it holds {}",
            blob.len() - 8
        ));
    }
    let (body, crc) = rest.split_at(length);
    if body[..4] != DV_MAGIC {
        return Err(format!(
            "its magic bytes are {:02X?}, not D1 D3 39 64",
            &body[..4]
        ));
    }
    let stored = u32::from_be_bytes([crc[0], crc[1], crc[2], crc[3]]);
    let computed = crc32fast::hash(body);
    if stored != computed {
        return Err(format!(
            "its CRC-32 is {stored:08x} but its bytes give {computed:08x}"
        ));
    }
    let mut bitmap = &body[4..];
    let positions = RoaringTreemap::deserialize_from(&mut bitmap)
        .map_err(|err| format!("its bitmap is not a portable Roaring bitmap: {err}"))?;
    if !bitmap.is_empty() {
        return Err(format!("{} bytes follow its bitmap", bitmap.len()));
    }
    if positions.max().is_some_and(|max| max > i64::MAX as u64) {
        return Err("it holds a position past 2^63".into());
    }
    Ok(positions)
}

/// A blob of a Puffin file to write: a DV's bytes, the data file it deletes rows of and
/// how many rows it deletes.
struct PuffinBlob<'a> {
    bytes: Vec<u8>,
    referenced: &'a str,
    cardinality: u64,
}

/// The bytes of a Puffin file holding `blobs` one after the other, and the offset of each:
/// magic, the blobs, and the footer (magic, its JSON, the JSON's length as u32 LE, four
/// flag bytes, none set: the JSON is not compressed, and magic).
fn puffin_file(blobs: &[PuffinBlob<'_>]) -> Result<(Vec<u8>, Vec<u64>), SinkError> {
    let mut offsets = Vec::with_capacity(blobs.len());
    let mut next = PUFFIN_MAGIC.len() as u64;
    for blob in blobs {
        offsets.push(next);
        next += blob.bytes.len() as u64;
    }
    let described: Vec<serde_json::Value> = blobs
        .iter()
        .zip(&offsets)
        .map(|(blob, offset)| {
            serde_json::json!({
                "type": DV_BLOB_TYPE,
                "fields": [ROW_POSITION_FIELD_ID],
                // Not known when the file is written: the spec says -1.
                "snapshot-id": -1,
                "sequence-number": -1,
                "offset": offset,
                "length": blob.bytes.len(),
                "properties": {
                    "referenced-data-file": blob.referenced,
                    "cardinality": blob.cardinality.to_string(),
                },
            })
        })
        .collect();
    let footer = serde_json::json!({
        "blobs": described,
        "properties": {
            "created-by": concat!("floe ", env!("CARGO_PKG_VERSION")),
        },
    });
    let payload = serde_json::to_vec(&footer)
        .map_err(|err| SinkError::internal(format!("cannot write a Puffin footer: {err}")))?;
    let payload_length = u32::try_from(payload.len())
        .map_err(|_| SinkError::internal("a Puffin footer is larger than 4 GiB"))?;
    let mut file = Vec::with_capacity(next as usize + payload.len() + 16);
    file.extend_from_slice(&PUFFIN_MAGIC);
    for blob in blobs {
        file.extend_from_slice(&blob.bytes);
    }
    file.extend_from_slice(&PUFFIN_MAGIC);
    file.extend_from_slice(&payload);
    file.extend_from_slice(&payload_length.to_le_bytes());
    file.extend_from_slice(&[0; 4]);
    file.extend_from_slice(&PUFFIN_MAGIC);
    Ok((file, offsets))
}

/// Whether `file` is a deletion vector (a position delete kept in a Puffin file).
pub(crate) fn is_deletion_vector(file: &DataFile) -> bool {
    file.content_type() == DataContentType::PositionDeletes
        && file.file_format() == DataFileFormat::Puffin
}

/// What tells a table's file entries apart: the path, and the blob's offset for a DV
/// (the DVs of one commit share their Puffin file; other files have no offset).
pub(crate) type EntryKey<'a> = (&'a str, Option<i64>);

/// The [`EntryKey`] of `file`.
pub(crate) fn entry_key(file: &DataFile) -> EntryKey<'_> {
    (file.file_path(), file.content_offset())
}

/// A new DV: the data file it deletes rows of (its path, spec and partition, which the DV
/// shares) and the positions it deletes.
pub(crate) struct DvTarget<'a> {
    pub data_file: &'a str,
    pub spec_id: i32,
    pub partition: &'a Struct,
    pub positions: &'a RoaringTreemap,
}

/// Writes the DVs `targets` into one Puffin file under the table's metadata folder, named
/// by `prefix`, and returns their delete file entries in the same order (none, and no
/// file, for no targets).
pub(crate) async fn write_deletion_vectors(
    table: &LoadedTable,
    prefix: &str,
    targets: &[DvTarget<'_>],
) -> Result<Vec<DataFile>, SinkError> {
    if targets.is_empty() {
        return Ok(Vec::new());
    }
    let blobs = targets
        .iter()
        .map(|target| {
            Ok(PuffinBlob {
                bytes: encode_blob(target.positions)?,
                referenced: target.data_file,
                cardinality: target.positions.len(),
            })
        })
        .collect::<Result<Vec<_>, SinkError>>()?;
    let (bytes, offsets) = puffin_file(&blobs)?;
    // In the metadata folder and named `.stats`, as Iceberg's own Puffin files (its
    // statistics files) are: stores with S3 Tables' rules (SeaweedFS) refuse any other
    // name there and any Puffin file among the data files; readers go by the entry's file
    // format, never by the name.
    let path = format!(
        "{}/metadata/{prefix}-{}.stats",
        table.metadata.location().trim_end_matches('/'),
        uuid::Uuid::new_v4()
    );
    let size = bytes.len() as u64;
    table
        .file_io
        .new_output(&path)
        .map_err(|err| storage_error(format!("cannot write {path}"), err))?
        .write(bytes.into())
        .await
        .map_err(|err| storage_error(format!("cannot write {path}"), err))?;
    targets
        .iter()
        .zip(blobs.iter().zip(offsets))
        .map(|(target, (blob, offset))| dv_entry(target, blob, (&path, size), offset))
        .collect()
}

/// The delete file entry of the DV of `target` written as `blob` at `offset` of the
/// Puffin file `(path, size)`.
fn dv_entry(
    target: &DvTarget<'_>,
    blob: &PuffinBlob<'_>,
    (path, size): (&str, u64),
    offset: u64,
) -> Result<DataFile, SinkError> {
    let too_large = || SinkError::internal("a deletion vector is too large");
    let content_size = i64::try_from(blob.bytes.len()).map_err(|_| too_large())?;
    let offset = i64::try_from(offset).map_err(|_| too_large())?;
    DataFileBuilder::default()
        .content(DataContentType::PositionDeletes)
        .file_path(path.to_string())
        .file_format(DataFileFormat::Puffin)
        .partition(target.partition.clone())
        .partition_spec_id(target.spec_id)
        .record_count(blob.cardinality)
        .file_size_in_bytes(size)
        .referenced_data_file(Some(target.data_file.to_string()))
        .content_offset(Some(offset))
        .content_size_in_bytes(Some(content_size))
        .build()
        .map_err(|err| SinkError::internal(format!("cannot describe a deletion vector: {err}")))
}

/// The positions the DV `file` (a delete manifest entry) deletes, read from its Puffin
/// file at the entry's offset; an error naming the file when the bytes are no DV or
/// disagree with the entry.
pub(crate) async fn read_deletion_vector(
    table: &LoadedTable,
    file: &DataFile,
) -> Result<RoaringTreemap, SinkError> {
    let path = file.file_path();
    let (Some(offset), Some(length)) = (file.content_offset(), file.content_size_in_bytes()) else {
        return Err(bad_dv(
            path,
            "its manifest entry has no content_offset or content_size_in_bytes",
        ));
    };
    let (Ok(start), Ok(length)) = (u64::try_from(offset), u64::try_from(length)) else {
        return Err(bad_dv(
            path,
            "its manifest entry has a negative offset or size",
        ));
    };
    let end = start
        .checked_add(length)
        .filter(|end| *end <= file.file_size_in_bytes())
        .ok_or_else(|| bad_dv(path, "its blob lies past the end of the file"))?;
    let reader = table
        .file_io
        .new_input(path)
        .map_err(|err| storage_error(format!("cannot open {path}"), err))?
        .reader()
        .await
        .map_err(|err| storage_error(format!("cannot open {path}"), err))?;
    let bytes = iceberg::io::FileRead::read(&reader, start..end)
        .await
        .map_err(|err| storage_error(format!("cannot read {path}"), err))?;
    let positions = decode_blob(&bytes).map_err(|why| bad_dv(path, &why))?;
    if positions.len() != file.record_count() {
        return Err(bad_dv(
            path,
            &format!(
                "it holds {} positions but its manifest entry says {}",
                positions.len(),
                file.record_count()
            ),
        ));
    }
    Ok(positions)
}

fn bad_dv(path: &str, why: &str) -> SinkError {
    SinkError::new(
        ErrorKind::UnexpectedResponse,
        format!("cannot read the deletion vector in {path}: {why}"),
    )
    .with_detail("A deletion vector is a deletion-vector-v1 blob of a Puffin file, as the Iceberg spec describes it.")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The blob of positions {1, 5}, byte by byte from the specs: a treemap of one 32-bit
    /// bitmap (key 0) holding one array container.
    fn known_blob() -> Vec<u8> {
        let bitmap: Vec<u8> = [
            &1u64.to_le_bytes()[..], // one 32-bit bitmap
            &0u32.to_le_bytes(),     // its key: the high 32 bits
            &12346u32.to_le_bytes(), // SERIAL_COOKIE_NO_RUNCONTAINER
            &1u32.to_le_bytes(),     // one container
            &0u16.to_le_bytes(),     // its key
            &1u16.to_le_bytes(),     // its cardinality - 1
            &16u32.to_le_bytes(),    // its offset: after cookie, count, header, offsets
            &1u16.to_le_bytes(),     // the array: 1, 5
            &5u16.to_le_bytes(),
        ]
        .concat();
        let body = [&DV_MAGIC[..], &bitmap].concat();
        [
            &(body.len() as u32).to_be_bytes()[..],
            &body,
            &crc32fast::hash(&body).to_be_bytes(),
        ]
        .concat()
    }

    #[test]
    fn a_blob_has_the_specs_bytes() {
        let positions: RoaringTreemap = [1u64, 5].into_iter().collect();
        let blob = encode_blob(&positions).unwrap();
        assert_eq!(blob, known_blob());
        // The length counts magic and bitmap, big-endian; the magic follows it.
        assert_eq!(&blob[..4], &[0, 0, 0, 36]);
        assert_eq!(&blob[4..8], &[0xD1, 0xD3, 0x39, 0x64]);
        // CRC-32 (IEEE) of magic and bitmap, big-endian, last.
        let crc = crc32fast::hash(&blob[4..blob.len() - 4]);
        assert_eq!(&blob[blob.len() - 4..], &crc.to_be_bytes());
        assert_eq!(decode_blob(&blob).unwrap(), positions);
    }

    #[test]
    fn the_crc_is_the_standard_crc32() {
        // The check value of CRC-32/ISO-HDLC, which zlib and Java's CRC32 compute.
        assert_eq!(crc32fast::hash(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn blobs_round_trip_including_positions_past_32_bits() {
        let mut positions: RoaringTreemap = (0..10_000u64).step_by(3).collect();
        positions.insert(u64::from(u32::MAX) + 7);
        positions.insert(1 << 40);
        let blob = encode_blob(&positions).unwrap();
        assert_eq!(decode_blob(&blob).unwrap(), positions);
        let empty = RoaringTreemap::new();
        assert_eq!(decode_blob(&encode_blob(&empty).unwrap()).unwrap(), empty);
    }

    #[test]
    fn damaged_blobs_are_refused_with_a_reason() {
        let blob = known_blob();
        let reason = |bytes: &[u8]| decode_blob(bytes).unwrap_err();
        assert!(
            reason(&blob[..8]).contains("too short"),
            "{}",
            reason(&blob[..8])
        );
        assert!(reason(&blob[..blob.len() - 1]).contains("length"));
        let mut magic = blob.clone();
        magic[4] = 0xD2;
        assert!(reason(&magic).contains("magic"), "{}", reason(&magic));
        let mut crc = blob.clone();
        let last = crc.len() - 1;
        crc[last] ^= 1;
        assert!(reason(&crc).contains("CRC"), "{}", reason(&crc));
        // A bitmap that is not one, with a CRC that matches it.
        let body = [&DV_MAGIC[..], &[9, 9, 9]].concat();
        let garbage = [
            &(body.len() as u32).to_be_bytes()[..],
            &body,
            &crc32fast::hash(&body).to_be_bytes(),
        ]
        .concat();
        assert!(reason(&garbage).contains("Roaring"), "{}", reason(&garbage));
        // Every truncation and every flipped byte is an error, never a panic.
        for end in 0..blob.len() {
            assert!(decode_blob(&blob[..end]).is_err());
        }
        for at in 0..blob.len() {
            let mut flipped = blob.clone();
            flipped[at] ^= 0x40;
            assert!(decode_blob(&flipped).is_err(), "byte {at}");
        }
    }

    #[test]
    fn a_puffin_file_holds_each_blob_at_its_offset_and_a_footer_naming_them() {
        let first: RoaringTreemap = [1u64, 5].into_iter().collect();
        let second: RoaringTreemap = (0..1000u64).step_by(7).collect();
        let blobs = [
            PuffinBlob {
                bytes: encode_blob(&first).unwrap(),
                referenced: "s3://b/t/data/a.parquet",
                cardinality: first.len(),
            },
            PuffinBlob {
                bytes: encode_blob(&second).unwrap(),
                referenced: "s3://b/t/data/b.parquet",
                cardinality: second.len(),
            },
        ];
        let (file, offsets) = puffin_file(&blobs).unwrap();
        assert_eq!(&file[..4], b"PFA1");
        assert_eq!(offsets, [4, 4 + blobs[0].bytes.len() as u64]);
        assert_eq!(&file[file.len() - 4..], b"PFA1");
        // Footer: magic, payload, payload length (LE), flags, magic.
        let flags = &file[file.len() - 8..file.len() - 4];
        assert_eq!(flags, &[0, 0, 0, 0]);
        let length = u32::from_le_bytes(file[file.len() - 12..file.len() - 8].try_into().unwrap());
        let payload_start = file.len() - 12 - length as usize;
        assert_eq!(&file[payload_start - 4..payload_start], b"PFA1");
        let footer: serde_json::Value =
            serde_json::from_slice(&file[payload_start..file.len() - 12]).unwrap();
        for (at, (blob, positions)) in blobs.iter().zip([&first, &second]).enumerate() {
            let meta = &footer["blobs"][at];
            let offset = offsets[at] as usize;
            // Each blob decodes alone from its offset and length.
            let bytes = &file[offset..offset + blob.bytes.len()];
            assert_eq!(decode_blob(bytes).unwrap(), *positions);
            assert_eq!(meta["type"], "deletion-vector-v1");
            assert_eq!(meta["offset"], offset);
            assert_eq!(meta["length"], blob.bytes.len());
            assert_eq!(meta["snapshot-id"], -1);
            assert_eq!(meta["properties"]["referenced-data-file"], blob.referenced);
            assert_eq!(
                meta["properties"]["cardinality"],
                positions.len().to_string()
            );
            assert!(meta.get("compression-codec").is_none());
        }
        assert_eq!(footer["blobs"].as_array().unwrap().len(), 2);
        // The footer's magic follows the last blob.
        let end = offsets[1] as usize + blobs[1].bytes.len();
        assert_eq!(&file[end..end + 4], b"PFA1");
    }
}
