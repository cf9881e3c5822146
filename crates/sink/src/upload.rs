//! File IO whose writers upload in the background: a data file's next row group is
//! encoded while its last one uploads.
//!
//! The `parquet` crate hands a file's bytes to its writer a row group at a time and waits
//! for each hand-over, and opendal's S3 writer uploads a part of a multipart upload
//! within that wait. So a writer encoded a row group, then sat idle while it uploaded,
//! then encoded the next: a 10M-row snapshot's five row groups per file each waited for
//! the store. [`UploadingStorage`] wraps the S3 storage and gives writers that hand each
//! part to a task of their own, which uploads it; the writer goes on encoding at once.
//! At most one part waits beside the one uploading, so a writer's memory stays bounded by
//! three row groups, and `close` returns only once every part is uploaded and the upload
//! completed, so a file is whole when its writer says it is.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use iceberg::io::{
    FileMetadata, FileRead, FileWrite, InputFile, OutputFile, Storage, StorageConfig,
    StorageFactory,
};
use iceberg::{Error, ErrorKind, Result};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Parts waiting for the upload task beside the one it uploads.
const WAITING_PARTS: usize = 1;

/// Builds [`UploadingStorage`]s over the storages `inner` builds.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct UploadingStorageFactory {
    inner: Box<dyn StorageFactory>,
}

impl UploadingStorageFactory {
    pub(crate) fn new(inner: impl StorageFactory + 'static) -> UploadingStorageFactory {
        UploadingStorageFactory {
            inner: Box::new(inner),
        }
    }
}

#[typetag::serde(name = "FloeUploadingStorageFactory")]
impl StorageFactory for UploadingStorageFactory {
    fn build(&self, config: &StorageConfig) -> Result<Arc<dyn Storage>> {
        Ok(Arc::new(UploadingStorage {
            inner: self.inner.build(config)?,
        }))
    }
}

/// A storage that is `inner` except that its writers upload in the background.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct UploadingStorage {
    #[serde(with = "shared_storage")]
    inner: Arc<dyn Storage>,
}

#[async_trait]
#[typetag::serde(name = "FloeUploadingStorage")]
impl Storage for UploadingStorage {
    async fn exists(&self, path: &str) -> Result<bool> {
        self.inner.exists(path).await
    }

    async fn metadata(&self, path: &str) -> Result<FileMetadata> {
        self.inner.metadata(path).await
    }

    async fn read(&self, path: &str) -> Result<Bytes> {
        self.inner.read(path).await
    }

    async fn reader(&self, path: &str) -> Result<Box<dyn FileRead>> {
        self.inner.reader(path).await
    }

    async fn write(&self, path: &str, bs: Bytes) -> Result<()> {
        self.inner.write(path, bs).await
    }

    async fn writer(&self, path: &str) -> Result<Box<dyn FileWrite>> {
        Ok(Box::new(BackgroundWrite::spawn(
            self.inner.writer(path).await?,
        )))
    }

    async fn delete(&self, path: &str) -> Result<()> {
        self.inner.delete(path).await
    }

    async fn delete_prefix(&self, path: &str) -> Result<()> {
        self.inner.delete_prefix(path).await
    }

    async fn delete_stream(
        &self,
        paths: futures::stream::BoxStream<'static, String>,
    ) -> Result<()> {
        self.inner.delete_stream(paths).await
    }

    fn new_input(&self, path: &str) -> Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_string()))
    }

    fn new_output(&self, path: &str) -> Result<OutputFile> {
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_string()))
    }
}

/// A writer whose parts go to a task that writes them to the inner writer, in order, and
/// closes it when the parts end.
struct BackgroundWrite {
    /// `None` once closed: dropping it ends the task's parts.
    parts: Option<mpsc::Sender<Bytes>>,
    /// The task: the outcome of the writes and of the close. Aborted when this writer is
    /// dropped unclosed (a failed batch), so a partial file is never completed.
    task: Option<JoinHandle<Result<()>>>,
}

impl BackgroundWrite {
    fn spawn(mut inner: Box<dyn FileWrite>) -> BackgroundWrite {
        let (parts, mut receiver) = mpsc::channel::<Bytes>(WAITING_PARTS);
        let task = tokio::spawn(async move {
            while let Some(part) = receiver.recv().await {
                inner.write(part).await?;
            }
            inner.close().await
        });
        BackgroundWrite {
            parts: Some(parts),
            task: Some(task),
        }
    }

    /// Waits for the task: the first failure of its writes or its close.
    async fn finish(&mut self) -> Result<()> {
        let Some(task) = self.task.take() else {
            return Err(Error::new(
                ErrorKind::Unexpected,
                "file writer already closed",
            ));
        };
        task.await.map_err(|err| {
            Error::new(
                ErrorKind::Unexpected,
                format!("the file's upload task failed: {err}"),
            )
        })?
    }
}

#[async_trait]
impl FileWrite for BackgroundWrite {
    async fn write(&mut self, bs: Bytes) -> Result<()> {
        let sent = match &self.parts {
            Some(parts) => parts.send(bs).await.is_ok(),
            None => false,
        };
        if sent {
            return Ok(());
        }
        // The task stopped taking parts: a write failed (its error), or this writer was
        // closed.
        self.parts = None;
        self.finish().await?;
        Err(Error::new(
            ErrorKind::Unexpected,
            "file written after close",
        ))
    }

    async fn close(&mut self) -> Result<()> {
        // The end of the parts: the task closes the inner writer after the last one.
        self.parts = None;
        self.finish().await
    }
}

impl Drop for BackgroundWrite {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// Serde for the shared inner storage, through iceberg's tagged `dyn Storage`.
mod shared_storage {
    use std::sync::Arc;

    use iceberg::io::Storage;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(
        storage: &Arc<dyn Storage>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        storage.as_ref().serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Arc<dyn Storage>, D::Error> {
        Ok(Arc::from(Box::<dyn Storage>::deserialize(deserializer)?))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use tokio::sync::Semaphore;

    use super::*;

    /// What an inner writer saw.
    #[derive(Default)]
    struct Seen {
        parts: Vec<Bytes>,
        closed: bool,
    }

    /// An inner writer that records its parts, takes a permit of `gate` for each write
    /// (so a test decides when an upload ends), and fails the write of `fail_part`.
    struct RecordingWrite {
        seen: Arc<Mutex<Seen>>,
        gate: Arc<Semaphore>,
        fail_part: Option<usize>,
    }

    #[async_trait]
    impl FileWrite for RecordingWrite {
        async fn write(&mut self, bs: Bytes) -> Result<()> {
            self.gate.acquire().await.expect("gate open").forget();
            let mut seen = self.seen.lock().expect("seen");
            if self.fail_part == Some(seen.parts.len()) {
                return Err(Error::new(
                    ErrorKind::Unexpected,
                    "the store refused a part",
                ));
            }
            seen.parts.push(bs);
            Ok(())
        }

        async fn close(&mut self) -> Result<()> {
            self.seen.lock().expect("seen").closed = true;
            Ok(())
        }
    }

    fn writer(fail_part: Option<usize>) -> (BackgroundWrite, Arc<Mutex<Seen>>, Arc<Semaphore>) {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let gate = Arc::new(Semaphore::new(0));
        let inner = RecordingWrite {
            seen: seen.clone(),
            gate: gate.clone(),
            fail_part,
        };
        (BackgroundWrite::spawn(Box::new(inner)), seen, gate)
    }

    async fn returns_soon<T>(future: impl std::future::Future<Output = T>) -> Option<T> {
        tokio::time::timeout(Duration::from_millis(200), future)
            .await
            .ok()
    }

    #[tokio::test]
    async fn a_part_is_taken_while_the_one_before_it_uploads_and_close_waits_for_all() {
        let (mut writer, seen, gate) = writer(None);
        // The first part uploads (held at the gate), the second waits beside it: both
        // writes return at once.
        for part in ["a", "b"] {
            let written = returns_soon(writer.write(Bytes::from(part))).await;
            assert!(
                matches!(written, Some(Ok(()))),
                "part {part} was not taken at once"
            );
        }
        // A third part waits for room: the writer's memory is bounded.
        let mut third = Box::pin(writer.write(Bytes::from("c")));
        assert!(
            returns_soon(&mut third).await.is_none(),
            "a third part was taken"
        );
        assert!(seen.lock().expect("seen").parts.is_empty());
        gate.add_permits(1);
        assert!(matches!(returns_soon(third).await, Some(Ok(()))));
        let mut close = Box::pin(writer.close());
        assert!(
            returns_soon(&mut close).await.is_none(),
            "closed before the uploads"
        );
        gate.add_permits(2);
        assert!(matches!(returns_soon(close).await, Some(Ok(()))));
        let seen = seen.lock().expect("seen");
        assert_eq!(
            seen.parts,
            vec![Bytes::from("a"), Bytes::from("b"), Bytes::from("c")]
        );
        assert!(seen.closed, "the inner writer was closed after its parts");
    }

    #[tokio::test]
    async fn a_failed_upload_is_the_error_of_the_close_and_the_file_is_not_completed() {
        let (mut writer, seen, gate) = writer(Some(1));
        gate.add_permits(10);
        writer.write(Bytes::from("a")).await.expect("first part");
        writer.write(Bytes::from("b")).await.expect("handed over");
        let error = writer.close().await.expect_err("the upload failed");
        assert!(
            error.to_string().contains("the store refused a part"),
            "{error}"
        );
        assert!(
            !seen.lock().expect("seen").closed,
            "a failed file was completed"
        );
    }

    #[tokio::test]
    async fn a_failed_upload_is_the_error_of_a_later_write() {
        let (mut writer, _seen, gate) = writer(Some(0));
        gate.add_permits(10);
        writer.write(Bytes::from("a")).await.expect("handed over");
        // The task ends at the failure; a write soon finds it gone (the channel may still
        // take one part before that).
        let mut failed = None;
        for _ in 0..3 {
            if let Err(error) = writer.write(Bytes::from("more")).await {
                failed = Some(error);
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let error = failed.expect("a write after the failure fails");
        assert!(
            error.to_string().contains("the store refused a part"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_writer_dropped_unclosed_never_completes_its_file() {
        let (mut writer, seen, gate) = writer(None);
        writer.write(Bytes::from("a")).await.expect("handed over");
        drop(writer);
        gate.add_permits(10);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            !seen.lock().expect("seen").closed,
            "a dropped writer's file was completed"
        );
    }
}
