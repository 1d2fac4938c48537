//! One error type per operation; each `Display` says what was wrong and what is allowed.

use std::path::PathBuf;

use crate::DType;

/// Why a stream name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid stream name {name:?}: {reason}; allowed: 1 to {max} characters from A-Z a-z 0-9 _ - . (not starting with '.')", max = crate::layout::NAME_MAX)]
pub struct NameError {
    /// The name given.
    pub name: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// Errors of [`crate::Stream::create`].
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// The name is not allowed.
    #[error(transparent)]
    Name(#[from] NameError),
    /// A stream of that name exists.
    #[error("a stream named {name:?} already exists (remove it first with `rtloop stream remove {name}` or `Stream::remove`)")]
    AlreadyExists {
        /// The name.
        name: String,
    },
    /// A replacement was asked for, but a live process writes the stream.
    #[error("a stream named {name:?} exists and its writer (pid {pid}) is alive; it is not replaced under a running writer (stop that process first)")]
    InUse {
        /// The name.
        name: String,
        /// The live writer's pid.
        pid: u32,
    },
    /// A replacement was asked for, but the stream is new: its creator is alive and no
    /// writer has claimed it yet (it is about to be written, not dead).
    #[error("a stream named {name:?} was just created by process {pid}, which is alive and has not claimed its writer yet; it is not replaced before its first writer (use another name, or stop that process first)")]
    NotYetWritten {
        /// The name.
        name: String,
        /// The creator's pid.
        pid: u32,
    },
    /// Capacity 0.
    #[error("capacity must be at least 1 sample, got 0")]
    ZeroCapacity,
    /// Channel count 0.
    #[error("a stream needs at least 1 channel, got 0")]
    ZeroChannels,
    /// Channel count above the limit.
    #[error("{n_channels} channels is more than the {max} a stream allows")]
    TooManyChannels {
        /// Asked for.
        n_channels: u64,
        /// The limit.
        max: u64,
    },
    /// Event capacity 0.
    #[error("event capacity must be at least 1 event, got 0")]
    ZeroEventCapacity,
    /// Rate is negative or not finite.
    #[error("nominal rate must be a finite number >= 0 (0 means irregular), got {0}")]
    InvalidRate(f64),
    /// The shared memory would be larger than the machine allows.
    #[error("a stream of {capacity} samples x {sample_bytes} B needs {requested_bytes} bytes of shared memory but only {available_bytes} are available ({limit}); {advice}")]
    TooLarge {
        /// Samples asked for.
        capacity: u64,
        /// Bytes per sample.
        sample_bytes: u64,
        /// Bytes the stream would need.
        requested_bytes: u64,
        /// Bytes available.
        available_bytes: u64,
        /// What limits it: the free space of the shared-memory file system, or memory.
        limit: String,
        /// How to make room.
        advice: String,
    },
    /// Channel names or units do not match the channel count, or are too long.
    #[error("{0}")]
    Labels(String),
    /// An OS call failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Errors of [`crate::Stream::open`].
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The name is not allowed.
    #[error(transparent)]
    Name(#[from] NameError),
    /// No such stream.
    #[error("no stream named {name:?} (looked for {path}); `rtloop stream list` shows the streams there are")]
    NotFound {
        /// The name.
        name: String,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The file is not an rtloop stream.
    #[error("{path} is not an rtloop stream: {reason}")]
    NotAStream {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The file may not be mapped: a symbolic link, not a regular file, or owned by
    /// another user (mapping a file someone else can truncate or replace would let them
    /// crash this process with SIGBUS).
    #[error("{path} is refused: {reason}")]
    Refused {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The stream was made by another layout version.
    #[error("{path} has stream layout version {found}, this rtloop reads version {expected}; recreate the stream with this version of rtloop")]
    LayoutVersion {
        /// The file.
        path: PathBuf,
        /// Version in the file.
        found: u32,
        /// Version this build reads.
        expected: u32,
    },
    /// An OS call failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Errors of [`crate::Stream::remove`].
#[derive(Debug, thiserror::Error)]
pub enum RemoveError {
    /// The name is not allowed.
    #[error(transparent)]
    Name(#[from] NameError),
    /// No such stream.
    #[error("no stream named {name:?} to remove")]
    NotFound {
        /// The name.
        name: String,
    },
    /// The file under the stream's name is not an rtloop stream this user owns, so it is
    /// left alone.
    #[error("{path} is not removed: {reason}; `stream remove` removes only rtloop streams of this user (delete other files by hand if you are sure)")]
    NotAStream {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// An OS call failed.
    #[error("remove {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Errors of [`crate::Stream::writer`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    /// Another live process holds the writer.
    #[error("stream {name:?} already has a writer (pid {pid}); a stream has exactly one writer — close that one first")]
    WriterBusy {
        /// The stream.
        name: String,
        /// The holder's pid.
        pid: u32,
    },
    /// Every reader slot is taken by a live reader.
    #[error("stream {name:?} already has {max} readers, the most it allows; close a reader first")]
    NoReaderSlot {
        /// The stream.
        name: String,
        /// The limit.
        max: usize,
    },
    /// The stream's name no longer leads to this stream (removed, or replaced by a new
    /// stream of that name): a writer here would write to nobody.
    #[error("stream {name:?} has ended: its name was removed or now belongs to a newer stream, so nothing written here would reach a reader; open the stream by name again, or create it anew")]
    Ended {
        /// The stream.
        name: String,
    },
}

/// Errors of writing samples.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// Data of the wrong dtype.
    #[error("stream {name:?} holds {expected} samples, got {got} data; convert it first")]
    DTypeMismatch {
        /// The stream.
        name: String,
        /// The stream's dtype.
        expected: DType,
        /// The data's dtype.
        got: DType,
    },
    /// Data that is not a whole number of samples.
    #[error("stream {name:?} has {n_channels} channels, but the data holds {values} values, which is not a whole number of samples (expected shape (n_samples, {n_channels}))")]
    ChannelMismatch {
        /// The stream.
        name: String,
        /// Channels per sample.
        n_channels: usize,
        /// Values given.
        values: usize,
    },
    /// A reservation bigger than the ring.
    #[error("cannot reserve {requested} samples at once: the stream holds at most {capacity}")]
    TooLarge {
        /// Asked for.
        requested: u64,
        /// Capacity.
        capacity: u64,
    },
    /// Commit of more than was reserved.
    #[error("cannot commit {requested} samples: only {reserved} were reserved")]
    CommitTooLarge {
        /// Asked for.
        requested: u64,
        /// Reserved.
        reserved: u64,
    },
    /// A lossless reader did not make room in time.
    #[error("lossless reader (pid {reader_pid}) at sample {reader_cursor} did not make room for samples up to {needed_end} within {waited_ms} ms; the writer is held back by design in lossless mode")]
    Timeout {
        /// The slowest lossless reader.
        reader_pid: u32,
        /// Its cursor.
        reader_cursor: u64,
        /// End of the samples to be written.
        needed_end: u64,
        /// How long the writer waited.
        waited_ms: u64,
    },
    /// An event that does not fit a slot.
    #[error("event type and value take {bytes} bytes together, at most {max} fit in an event")]
    EventTooLarge {
        /// Bytes needed.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// A handle copied into a forked child: it belongs to the parent process.
    #[error("this handle of stream {name:?} was made by the parent process before a fork(); a forked child may not use it (open the stream again in the child)")]
    ForkedCopy {
        /// The stream.
        name: String,
    },
    /// A write longer than the ring went in pieces and one piece failed: `committed`
    /// samples of the `requested` are in the stream (readers may already have them).
    #[error("wrote {committed} of {requested} samples, then: {source}")]
    Incomplete {
        /// Samples of this write that were committed before the failure.
        committed: u64,
        /// Samples the write held.
        requested: u64,
        /// Why the next piece failed.
        source: Box<WriteError>,
    },
}

/// Errors of reading samples or events.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The reader was lapped: samples it wanted were overwritten.
    #[error("overrun: {lost} samples were overwritten before they were read (oldest kept is now {oldest}); read faster, use a larger capacity or lossless mode")]
    Overrun {
        /// Samples lost.
        lost: u64,
        /// The oldest sample still kept.
        oldest: u64,
    },
    /// The window reaches beyond what was written.
    #[error("window [{first}, {end}) reaches beyond the {written} samples written so far")]
    NotYetWritten {
        /// Window start.
        first: u64,
        /// Window end.
        end: u64,
        /// Samples written.
        written: u64,
    },
    /// The window begins before the oldest kept sample.
    #[error("window [{first}, {end}) begins before the oldest kept sample {oldest} (the stream keeps {capacity} samples)")]
    TooOld {
        /// Window start.
        first: u64,
        /// Window end.
        end: u64,
        /// The oldest kept sample.
        oldest: u64,
        /// Capacity.
        capacity: u64,
    },
    /// More of the newest samples than the stream keeps ([`crate::Reader::latest`]).
    #[error("cannot give the latest {requested} samples: the stream keeps {capacity}; ask for at most {capacity}")]
    MoreThanCapacity {
        /// Samples asked for.
        requested: u64,
        /// Capacity.
        capacity: u64,
    },
    /// A seek to a sample not written yet ([`crate::Reader::seek`]).
    #[error("cannot seek to sample {sample}: only {written} samples were written so far; seek to at most {written} (wait for later samples first)")]
    SeekBeyondWritten {
        /// The sample asked for.
        sample: u64,
        /// Samples written.
        written: u64,
    },
    /// `first > end`.
    #[error("window [{first}, {end}) is reversed: first must be <= end")]
    Reversed {
        /// Window start.
        first: u64,
        /// Window end.
        end: u64,
    },
    /// The output buffer is too small / of the wrong size.
    #[error("output buffer holds {got} bytes, the window needs {needed}")]
    BufferSize {
        /// Bytes needed.
        needed: usize,
        /// Bytes given.
        got: usize,
    },
    /// Typed access with the wrong type.
    #[error("stream {name:?} holds {expected} samples, not {got}")]
    DTypeMismatch {
        /// The stream.
        name: String,
        /// The stream's dtype.
        expected: DType,
        /// The requested dtype.
        got: DType,
    },
    /// An event slot that does not decode.
    #[error("event {index} is damaged: {reason}")]
    BadEvent {
        /// Event index.
        index: u64,
        /// Why.
        reason: &'static str,
    },
    /// A handle copied into a forked child: it belongs to the parent process.
    #[error("this handle of stream {name:?} was made by the parent process before a fork(); a forked child may not use it (open the stream again in the child)")]
    ForkedCopy {
        /// The stream.
        name: String,
    },
}

/// Errors of waiting for samples.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WaitError {
    /// The timeout passed first.
    #[error("timed out waiting for sample {until}; {written} samples written so far")]
    Timeout {
        /// Sample count waited for.
        until: u64,
        /// Samples written.
        written: u64,
    },
    /// The writer's process died.
    #[error("the writer (pid {pid}) died; {written} samples were written before it did")]
    WriterDead {
        /// The dead writer's pid.
        pid: u32,
        /// Samples written.
        written: u64,
    },
    /// The writer closed cleanly and the reader has every sample it wrote.
    #[error("the writer closed the stream after {written} samples; nothing more will come")]
    WriterClosed {
        /// Samples written.
        written: u64,
    },
    /// A handle copied into a forked child: it belongs to the parent process.
    #[error("this handle of stream {name:?} was made by the parent process before a fork(); a forked child may not use it (open the stream again in the child)")]
    ForkedCopy {
        /// The stream.
        name: String,
    },
}

/// Any of the stream's errors, by the operation that failed: for code that does several
/// operations and reports whichever failed (a bridge, a driver) with its source kept.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A stream name was refused.
    #[error(transparent)]
    Name(#[from] NameError),
    /// [`crate::Stream::create`].
    #[error(transparent)]
    Create(#[from] CreateError),
    /// [`crate::Stream::open`].
    #[error(transparent)]
    Open(#[from] OpenError),
    /// [`crate::Stream::remove`].
    #[error(transparent)]
    Remove(#[from] RemoveError),
    /// Claiming the writer or a reader slot.
    #[error(transparent)]
    Claim(#[from] ClaimError),
    /// Writing.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// Reading.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Waiting for samples or events.
    #[error(transparent)]
    Wait(#[from] WaitError),
}
