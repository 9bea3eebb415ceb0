/// Every error code Stowage reports, documented once: the stable snake_case ``rawValue`` that `--json`, the
/// service's answers and tests match on. Each ``StowageError`` gives one of these as its ``StowageError/code``, so a
/// code exists only here; the message that goes with it says what happened to what, and what to do.
///
/// The cases are grouped by where the code is raised. The key protocol's own codes (a key server's `error.code`) are
/// here too, under their wire spelling. `ErrorCatalogueTests` checks that every code is raised by the sources and
/// met by a test.
public enum ErrorCode: String, CaseIterable, Sendable, Hashable, Codable, CustomStringConvertible {
    // MARK: Command line

    /// A command is given options or arguments it cannot use.
    case invalidArguments = "invalid_arguments"

    // MARK: General

    /// A command is stopped before it finishes.
    case cancelled = "cancelled"
    /// Stowage fails in a way it does not describe yet.
    case internalError = "internal_error"
    /// The folder the origin server is asked to serve is not a directory.
    case originRootInvalid = "origin_root_invalid"
    /// An output file cannot be opened or written.
    case outputFailed = "output_failed"
    /// A program Stowage runs, such as a player or ffmpeg, cannot be started.
    case programNotStarted = "program_not_started"
    /// An input file, such as a playlist or segment, cannot be opened or read.
    case unreadable = "unreadable"

    // MARK: Playlists

    /// A playlist tag that may appear only once appears again.
    case duplicateTag = "duplicate_tag"
    /// Two EXT-X-DEFINE tags in a playlist define the same variable.
    case duplicateVariable = "duplicate_variable"
    /// A playlist attribute has a value of the wrong type or outside its range.
    case invalidAttributeValue = "invalid_attribute_value"
    /// A playlist byte range has no offset and does not follow a sub-range of the same resource.
    case invalidByteRange = "invalid_byte_range"
    /// A playlist tag's value cannot be read.
    case malformedTag = "malformed_tag"
    /// A required attribute is absent from a playlist tag.
    case missingAttribute = "missing_attribute"
    /// A tag a playlist must contain is absent.
    case missingRequiredTag = "missing_required_tag"
    /// A playlist tag that must be followed by a URI line is not.
    case missingURI = "missing_uri"
    /// A playlist mixes media segment tags and multivariant playlist tags.
    case mixedPlaylistKinds = "mixed_playlist_kinds"
    /// A playlist does not start with #EXTM3U.
    case notAPlaylist = "not_a_playlist"
    /// A playlist's bytes are not UTF-8.
    case notUTF8 = "not_utf8"
    /// A playlist's server answers with an HTTP error.
    case playlistHTTPStatus = "playlist_http_status"
    /// A playlist cannot be fetched because of a network error.
    case playlistNetworkError = "playlist_network_error"
    /// A playlist is larger than the most Stowage reads.
    case playlistTooLarge = "playlist_too_large"
    /// A local playlist file cannot be read.
    case playlistUnreadable = "playlist_unreadable"
    /// A playlist goes beyond a safety limit on its size or line length.
    case tooLarge = "too_large"
    /// A playlist refers to a variable that no earlier EXT-X-DEFINE defines, or whose import cannot be satisfied.
    case undefinedVariable = "undefined_variable"

    // MARK: Downloads and recordings

    /// A download is started for an asset that already exists.
    case downloadExists = "download_exists"
    /// An action is refused because the download is in a state that does not allow it.
    case downloadInvalidState = "download_invalid_state"
    /// No download of the asset exists.
    case downloadNotFound = "download_not_found"
    /// The download state in the state database cannot be read or written.
    case downloadStateError = "download_state_error"
    /// The key store no longer holds an inline key that a download stored when it was planned.
    case inlineKeyMissing = "inline_key_missing"
    /// There is not enough free disk space for a download, or free space is below the floor kept free.
    case insufficientStorage = "insufficient_storage"
    /// The keys of a live recording are not obtained after several acquisitions.
    case keysUnavailable = "keys_unavailable"
    /// A live playlist cannot be added to a package that already exists.
    case livePlaylist = "live_playlist"
    /// A recorded live playlist jumps ahead by more segments than a recording may miss.
    case liveSequenceJump = "live_sequence_jump"
    /// A recorded live playlist goes back to media sequence numbers the recording already holds.
    case liveSequenceReset = "live_sequence_reset"
    /// An asset uses skd keys but no key server is named for it.
    case noKeyServer = "no_key_server"
    /// No rendition of the requested kind matches the one asked for.
    case noMatchingRendition = "no_matching_rendition"
    /// A multivariant playlist lists no variant stream to download.
    case noVariant = "no_variant"
    /// A playlist that should be a media playlist is a multivariant playlist or something else.
    case notAMediaPlaylist = "not_a_media_playlist"
    /// A stop is asked for an asset that is not a live recording still going on.
    case notRecording = "not_recording"
    /// A download cannot write to its package or the data directory.
    case packageWriteFailed = "package_write_failed"
    /// The key server refuses one lease for as many keys as a live recording asks for at once.
    case recordingKeyLimit = "recording_key_limit"
    /// A segment cannot be downloaded.
    case segmentFailed = "segment_failed"
    /// A segment's server answers with an HTTP error.
    case segmentHTTPStatus = "segment_http_status"
    /// A segment's server announces or sends more bytes than one segment can be.
    case segmentTooLarge = "segment_too_large"
    /// A playlist lists more segments than Stowage accepts in one playlist.
    case tooManySegments = "too_many_segments"
    /// A URI is not fetched because it is neither http(s) nor a local file a local playlist names.
    case unsupportedURI = "unsupported_uri"

    // MARK: Offline packages

    /// Another task, such as a download or a deletion, holds the asset.
    case assetBusy = "asset_busy"
    /// Recovery is refused because another process, such as the download service or a download, uses the data directory.
    case dataDirectoryBusy = "data_directory_busy"
    /// The data directory cannot be created, restricted to its owner, or written.
    case dataDirectoryUnwritable = "data_directory_unwritable"
    /// The state database that holds the leases, keys and download records is damaged, as SQLite reports.
    case databaseDamaged = "database_damaged"
    /// Recovery is refused because the state database is not damaged.
    case databaseNotDamaged = "database_not_damaged"
    /// The export's output file already exists.
    case exportExists = "export_exists"
    /// ffmpeg fails while a package is exported to one file.
    case exportFailed = "export_failed"
    /// An export is refused because the package is not completely downloaded.
    case exportIncomplete = "export_incomplete"
    /// An export is refused because the asset's keys are leased and its policy does not allow export.
    case exportNotAllowed = "export_not_allowed"
    /// A file the manifest lists is not in the package, or is not a regular file.
    case fileMissing = "file_missing"
    /// A package file's SHA-256 differs from the manifest's, or the file was replaced by a link leading out of the package.
    case fileModified = "file_modified"
    /// A package file is larger than the manifest says.
    case fileSizeMismatch = "file_size_mismatch"
    /// A package file is smaller than the manifest says.
    case fileTruncated = "file_truncated"
    /// A package file exists but cannot be read (permissions, an I/O error).
    case fileUnreadable = "file_unreadable"
    /// An asset ID is not 1 to 128 letters, digits, '.', '_' or '-'.
    case invalidAssetID = "invalid_asset_id"
    /// The export's output name is not a format Stowage writes, or its folder does not exist.
    case invalidExportPath = "invalid_export_path"
    /// A package's manifest cannot be read or is not one this version understands.
    case invalidManifest = "invalid_manifest"
    /// Trial decryption gave data that is not valid MPEG-TS or fragmented MP4.
    case invalidMedia = "invalid_media"
    /// An identity key's local lifetime is over.
    case keyExpired = "key_expired"
    /// A key a package needs is in a stored lease that cannot be opened.
    case keyUnusable = "key_unusable"
    /// The lease is valid now but not for the whole duration asked for with `verify --for`, counting the playback window.
    case leaseNotLongEnough = "lease_not_long_enough"
    /// A package's manifest cannot be read, is not the schema, names a path outside the package, or contradicts itself.
    case manifestInvalid = "manifest_invalid"
    /// A package folder has no manifest.
    case manifestMissing = "manifest_missing"
    /// No key is available for a key URI of a playlist being decrypted.
    case missingKey = "missing_key"
    /// A URI of a playlist being decrypted is not a local file.
    case notLocal = "not_local"
    /// A file of a package cannot be written.
    case packageIOError = "package_io_error"
    /// There is no offline package for the asset.
    case packageNotFound = "package_not_found"
    /// A warning, not a failure: a live recording misses segments that left the playlist before they were fetched.
    case recordingGap = "recording_gap"
    /// A package path is absolute or leads outside the package.
    case unsafePath = "unsafe_path"
    /// A segment of a playlist being decrypted uses an encryption method Stowage does not decrypt.
    case unsupportedMethod = "unsupported_method"
    /// A key for a playlist being decrypted does not have the length its method needs.
    case wrongKeyLength = "wrong_key_length"

    // MARK: Cryptography and media

    /// An AES-GCM tag does not verify: the data, associated data, key or nonce is wrong or was altered.
    case authenticationFailed = "authentication_failed"
    /// Decrypted data does not end in valid PKCS#7 padding: the key or IV is wrong, or the data is damaged.
    case badPadding = "bad_padding"
    /// OpenSSL refuses an operation while a segment is encrypted or decrypted.
    case cryptoFailure = "crypto_failure"
    /// A segment's initialization vector is not 16 bytes.
    case invalidIV = "invalid_iv"
    /// An AES-CBC initialization vector is not 16 bytes.
    case invalidIVLength = "invalid_iv_length"
    /// A segment's key has the wrong length for its encryption method.
    case invalidKey = "invalid_key"
    /// A key does not have a length the algorithm or the key store accepts.
    case invalidKeyLength = "invalid_key_length"
    /// An AES-GCM nonce is not 12 bytes.
    case invalidNonceLength = "invalid_nonce_length"
    /// A private key has the wrong length or OpenSSL refuses it.
    case invalidPrivateKey = "invalid_private_key"
    /// A public key has the wrong length, or an X25519 exchange with it gives the all-zero secret.
    case invalidPublicKey = "invalid_public_key"
    /// A size in a segment goes beyond a safety limit and is refused rather than buffered.
    case limitExceeded = "limit_exceeded"
    /// A segment's container is damaged or lies about its sizes.
    case malformedContainer = "malformed_container"
    /// A SAMPLE-AES fragmented MP4 segment is processed without its rendition's init section.
    case missingInitSection = "missing_init_section"
    /// A segment whose encryption method needs an IV is processed without one.
    case missingIV = "missing_iv"
    /// A segment cannot be decrypted yet because a neighbouring segment it depends on is not stored.
    case neighbourSegmentPending = "neighbour_segment_pending"
    /// OpenSSL reports an unexpected failure, usually running out of memory.
    case openSSLFailure = "openssl_failure"
    /// The system random number generator fails to produce bytes.
    case randomFailure = "random_failure"
    /// Reading or writing a segment through a file descriptor fails.
    case segmentIOFailed = "segment_io_failed"
    /// A signature does not verify for the message and public key.
    case signatureInvalid = "signature_invalid"
    /// AES-CBC input ends inside a 16-byte block.
    case truncatedInput = "truncated_input"
    /// An encrypted segment is not a whole number of 16-byte blocks.
    case truncatedSegment = "truncated_segment"
    /// A well-formed segment uses a codec, scheme or layout Stowage does not handle.
    case unsupportedStream = "unsupported_stream"

    // MARK: Keys and leases on the device

    /// A signature does not verify for the signed bytes and public key: the message was altered or signed by another key.
    case badSignature = "bad_signature"
    /// The device's clock is further behind the key server's than the protocol allows, so a lease from it is not stored.
    case clockBehind = "clock_behind"
    /// The system clock is behind a time the device has already seen, or was set back since the lease was last renewed.
    case clockRollbackDetected = "clock_rollback_detected"
    /// The key store database fails, or stays locked by another process past the busy timeout.
    case databaseFailure = "database_failure"
    /// A lease is valid now but ends before the requested duration is over.
    case expiresTooSoon = "expires_too_soon"
    /// A stored identity key does not open although the key-encryption key is right: its record was altered.
    case identityKeyDamaged = "identity_key_damaged"
    /// A stored identity key's local lifetime has ended.
    case identityKeyExpired = "identity_key_expired"
    /// An identity key URI answers with an HTTP error, after any retries.
    case identityKeyFetchFailed = "identity_key_fetch_failed"
    /// No identity key is stored for a key URI.
    case identityKeyNotFound = "identity_key_not_found"
    /// An identity key URI cannot be reached, after any retries.
    case identityKeyUnreachable = "identity_key_unreachable"
    /// A key server is reached over plain HTTP on a network address rather than HTTPS or loopback.
    case insecureKeyServer = "insecure_key_server"
    /// A file or directory that holds secrets is open to group or others.
    case insecurePermissions = "insecure_permissions"
    /// An X25519 public key used to wrap or unwrap a content key is unusable.
    case invalidAgreementKey = "invalid_agreement_key"
    /// A CA file given for TLS trust cannot be read or holds no PEM certificate.
    case invalidCAFile = "invalid_ca_file"
    /// A content key has the wrong length or does not read as a key.
    case invalidContentKey = "invalid_content_key"
    /// A cookie file given for requests cannot be used.
    case invalidCookieFile = "invalid_cookie_file"
    /// A request header given in a file or on standard input is not of the form 'Name: value'.
    case invalidHeader = "invalid_header"
    /// An identity key URI answers with a body that is not a key of an allowed length.
    case invalidIdentityKey = "invalid_identity_key"
    /// A key written into a playlist as a data: URI cannot be used.
    case invalidInlineKey = "invalid_inline_key"
    /// A key ID is not 32 lowercase hex digits.
    case invalidKeyID = "invalid_key_id"
    /// A lease life-cycle event is not allowed in the lease's state, such as renewing a returned lease.
    case invalidLeaseTransition = "invalid_lease_transition"
    /// A signed payload from the key server does not verify with the pinned key or does not decode.
    case invalidPayload = "invalid_payload"
    /// A proxy URL, given as an option or in the environment, cannot be used.
    case invalidProxy = "invalid_proxy"
    /// A request is refused before it is acted on: an invalid asset ID, key server URL or request body.
    case invalidRequest = "invalid_request"
    /// A system call on a secret file or the data directory fails.
    case ioFailure = "io_failure"
    /// A key URI names an asset other than the one whose keys are acquired.
    case keyForOtherAsset = "key_for_other_asset"
    /// The key server cannot be reached.
    case keyServerUnreachable = "key_server_unreachable"
    /// A different payload for a lease that is already stored arrives other than through a renewal.
    case leaseAlreadyStored = "lease_already_stored"
    /// A lease has ended and its key material is erased, or the key server reports it expired.
    case leaseExpired = "lease_expired"
    /// A lease from one key server is refused because the asset holds keys from another key server.
    case leaseFromAnotherKeyServer = "lease_from_another_key_server"
    /// A streaming lease is offered to the key store, which stores only persistent leases.
    case leaseNotPersistent = "lease_not_persistent"
    /// A lease is not in the key store, or holds no key material.
    case leaseNotStored = "lease_not_stored"
    /// A stored lease disagrees with what the key server signed and this device recorded.
    case leaseTampered = "lease_tampered"
    /// No machine ID can be read, so sealed keys cannot be used.
    case machineIDUnavailable = "machine_id_unavailable"
    /// A secret file does not hold what it should, such as data of the wrong length.
    case malformedFile = "malformed_file"
    /// A key URI in a playlist is not of a form the client can use.
    case malformedKeyURI = "malformed_key_uri"
    /// A signed payload is not canonical base64 of a JSON lease payload with every required member.
    case malformedPayload = "malformed_payload"
    /// A signature is not canonical base64 of a 64-byte Ed25519 signature.
    case malformedSignature = "malformed_signature"
    /// A wrapped key's fields are not canonical base64 of the protocol's lengths.
    case malformedWrappedKey = "malformed_wrapped_key"
    /// A signed message carries no signature.
    case missingSignature = "missing_signature"
    /// No lease on this device covers the asset.
    case noLease = "no_lease"
    /// Keys or a lease renewal need an entitlement token and none is available.
    case noToken = "no_token"
    /// A secret file or directory belongs to another user.
    case notOwned = "not_owned"
    /// A lease is not valid yet by the device's clock.
    case notYetValid = "not_yet_valid"
    /// A signed payload verifies but does not answer the request sent, such as a different nonce, asset or lease.
    case payloadMismatch = "payload_mismatch"
    /// A key server's pinned key cannot be removed because a lease from that server still holds keys.
    case pinInUse = "pin_in_use"
    /// The file of pinned key server keys cannot be read, or a pin in it was altered.
    case pinnedKeyDamaged = "pinned_key_damaged"
    /// A lease's playback window has closed, or is empty so playback can never start.
    case playbackWindowExpired = "playback_window_expired"
    /// The key server confirmed the release of a lease, and its keys are gone.
    case released = "released"
    /// A lease renewal during lease upkeep fails.
    case renewalFailed = "renewal_failed"
    /// A lease was returned on this device, and its keys are erased.
    case returned = "returned"
    /// A sealed value does not open although the key-encryption key is right.
    case sealedDataDamaged = "sealed_data_damaged"
    /// The sealed keys in the data directory were sealed on another machine or with another key store secret.
    case sealingKeyMismatch = "sealing_key_mismatch"
    /// The key store secret is missing although keys in the data directory were sealed with it.
    case sealingSecretMissing = "sealing_secret_missing"
    /// A command needs a secret, such as a content key, and none is given.
    case secretMissing = "secret_missing"
    /// A secret, such as a token, key or proxy password, is written on the command line.
    case secretOnCommandLine = "secret_on_command_line"
    /// Two options give the same secret.
    case secretSourcesConflict = "secret_sources_conflict"
    /// A secret cannot be read from its file or standard input, or the source holds nothing.
    case secretUnreadable = "secret_unreadable"
    /// A key server presents a signing key other than the one pinned for it.
    case serverKeyMismatch = "server_key_mismatch"
    /// No signing key is pinned for a key server, so its payloads cannot be checked.
    case serverKeyNotPinned = "server_key_not_pinned"
    /// A lease's storage window has ended.
    case storageWindowExpired = "storage_window_expired"
    /// A lease is due for renewal but its stored entitlement token cannot be read.
    case tokenUnavailable = "token_unavailable"
    /// The key server answers with neither the expected message nor a protocol error.
    case unexpectedResponse = "unexpected_response"
    /// No lease with the given ID is known, on this device or to the key server.
    case unknownLease = "unknown_lease"
    /// A playlist's key lines offer no KEYFORMAT the client supports.
    case unsupportedKeyFormat = "unsupported_key_format"
    /// A signed payload is of a protocol version the client does not know.
    case unsupportedVersion = "unsupported_version"
    /// A server's TLS certificate is refused, whether a playlist's source or the key server.
    case untrustedCertificate = "untrusted_certificate"
    /// A playlist names a key server the user did not configure, and no request is sent to it.
    case untrustedKeyServer = "untrusted_key_server"
    /// A wrapped key does not open with the device's key for the lease: it was wrapped to another device or lease, or altered.
    case unwrapFailed = "unwrap_failed"
    /// A directory is found where a file is expected, or the other way round.
    case wrongFileType = "wrong_file_type"

    // MARK: The key protocol (answers of a key server)

    /// The key server cannot verify the device's signature on a request.
    case badDeviceSignature = "bad_device_signature"
    /// The key server refuses a request whose client time is further from its own clock than it allows.
    case clockSkew = "clock_skew"
    /// The key server already knows the device with a different public key.
    case deviceKeyMismatch = "device_key_mismatch"
    /// The account already holds leases on as many devices as its policy allows.
    case deviceLimitReached = "device_limit_reached"
    /// The key server fails internally while handling a request, which may have been acted on.
    case `internal` = "internal"
    /// A request carries no valid token: the entitlement token is refused, or the metrics token is wrong.
    case invalidToken = "invalid_token"
    /// The key server cannot read a request or finds it invalid.
    case malformedRequest = "malformed_request"
    /// The key server finds that the entitlement token or the asset's policy does not allow the lease requested.
    case notEntitled = "not_entitled"
    /// The key server refuses a request because too many came too fast.
    case rateLimited = "rate_limited"
    /// The key server refuses to renew a lease that is not renewable or whose policy no longer allows renewals.
    case renewalNotAllowed = "renewal_not_allowed"
    /// The key server refuses a request whose nonce was already used.
    case replayedRequest = "replayed_request"
    /// The account already streams on as many devices or tokens as its policy allows.
    case streamLimitReached = "stream_limit_reached"
    /// The key server does not know the asset requested.
    case unknownAsset = "unknown_asset"
    /// The key server does not know a key requested.
    case unknownKey = "unknown_key"

    // MARK: Playback

    /// The time the process sees disagrees with the kernel's clock, as when a time shim is preloaded into it.
    case clockUntrustworthy = "clock_untrustworthy"
    /// A file of a package cannot be decrypted, because it is damaged or the key is wrong.
    case decryptionFailed = "decryption_failed"
    /// A key a package needs is not held on this device.
    case keyMissing = "key_missing"
    /// The key store cannot be read while keys are looked up or leases are kept up.
    case keyStoreUnavailable = "key_store_unavailable"
    /// An asset still downloading has no keys stored yet.
    case keysPending = "keys_pending"
    /// Another process renews, returns or fetches an asset's leases while playback is authorized.
    case leasesChanged = "leases_changed"
    /// The key of an online rendition is not granted.
    case onlineKeyRefused = "online_key_refused"
    /// A file of an online rendition cannot be fetched from the source.
    case onlineUnavailable = "online_unavailable"
    /// A package is deleted while it plays.
    case packageDeleted = "package_deleted"
    /// A rendition of a package is not completely downloaded, or a file's size or checksum is unknown.
    case packageIncomplete = "package_incomplete"
    /// The playback server cannot start or fails.
    case playbackServerFailed = "playback_server_failed"
    /// A process of another user requests the playback URL.
    case playbackURLOtherUser = "playback_url_other_user"
    /// The one-time playback URL given to the player is requested again.
    case playbackURLReused = "playback_url_reused"
    /// A file's SHA-256 differs from the manifest's.
    case segmentChecksumMismatch = "segment_checksum_mismatch"
    /// A file of a package still downloading is not there yet, and a download is running.
    case segmentDownloading = "segment_downloading"
    /// A file the manifest lists is not on disk.
    case segmentMissing = "segment_missing"
    /// A file's size differs from the manifest's.
    case segmentModified = "segment_modified"
    /// A file of a package still downloading is not there, no download is running, and it cannot be fetched.
    case segmentNotDownloaded = "segment_not_downloaded"
    /// A package uses an encryption method or layout playback cannot decrypt.
    case unsupportedEncryption = "unsupported_encryption"
    /// Playback is refused because the process runs in a user namespace of its own.
    case userNamespaceRefused = "user_namespace_refused"

    // MARK: The download service

    /// A download fails without a more specific failure code recorded.
    case failed = "failed"
    /// A size given to the download service is not a positive quantity such as 500K, 5M or 1G.
    case invalidQuantity = "invalid_quantity"
    /// A time window given to the download service is not of the form HH:MM-HH:MM.
    case invalidTimeWindow = "invalid_time_window"
    /// A download waits because the current time is outside the service's time window.
    case outsideTimeWindow = "outside_time_window"
    /// A download service already runs on the data directory.
    case serviceAlreadyRunning = "service_already_running"
    /// The download service cannot carry out a request, for a reason it does not describe.
    case serviceError = "service_error"
    /// No download service runs on the data directory, or its socket path cannot be used.
    case serviceNotRunning = "service_not_running"
    /// The download service answers with something this version of Stowage cannot read.
    case serviceProtocolError = "service_protocol_error"
    /// A download waits because the download service stopped.
    case serviceStopped = "service_stopped"
    /// The download service does not answer in time.
    case serviceUnreachable = "service_unreachable"
    /// The download service's socket path is longer than a Unix socket path may be.
    case socketPathTooLong = "socket_path_too_long"

    // MARK: The key server

    /// A key server migration is refused because the target database already holds assets, devices, leases or audit.
    case databaseNotEmpty = "database_not_empty"
    /// The key server's PostgreSQL database cannot be reached or refuses the connection.
    case databaseUnavailable = "database_unavailable"
    /// A key server file that holds a secret is readable by other users.
    case insecureFile = "insecure_file"
    /// The key server's configuration file is invalid.
    case invalidConfiguration = "invalid_configuration"
    /// The key server's database URL is not a PostgreSQL URL.
    case invalidDatabaseURL = "invalid_database_url"
    /// A key server key file, such as its master key, cannot be read, written or used.
    case invalidKeyFile = "invalid_key_file"
    /// An asset on the key server already has a different key under the given key ID.
    case keyConflict = "key_conflict"
    /// Metrics are requested from a key server that has no metrics token file.
    case metricsDisabled = "metrics_disabled"
    /// The row counts of a key server table differ between the SQLite store and the database it is migrated into.
    case migrationMismatch = "migration_mismatch"
    /// A folder is not an initialized key server data directory.
    case notInitialized = "not_initialized"
    /// Another master key rotation holds the key server data directory's lock.
    case rotationInProgress = "rotation_in_progress"
    /// A master key rotation stops because content keys keep changing under it.
    case rotationIncomplete = "rotation_incomplete"
    /// A master key rotation on a shared database is started before the new master key was prepared.
    case rotationNotPrepared = "rotation_not_prepared"
    /// The key server database's schema version is not the one this build needs.
    case schemaOutdated = "schema_outdated"
    /// A sealed content key opens under none of the key server's master keys during a rotation.
    case sealedKeyUnreadable = "sealed_key_unreadable"
    /// An asset names a policy the key server's configuration does not define.
    case unknownPolicy = "unknown_policy"

    // MARK: Packaging

    /// The playlist given to package is already encrypted.
    case alreadyProtected = "already_protected"
    /// A content key cannot be registered with the key server while content is packaged.
    case keyRegistrationFailed = "key_registration_failed"
    /// The key server data directory given for packaging is not initialized.
    case missingDataDir = "missing_data_dir"
    /// Random bytes for a key or IV cannot be drawn while content is packaged.
    case randomFailed = "random_failed"
    /// A playlist given to package uses something packaging does not support.
    case unsupportedInput = "unsupported_input"

    // MARK: The demo

    /// The demo finds that the playback gate allows playback after the playback window has closed.
    case demoGateOpen = "demo_gate_open"
    /// The demo finds no lease stored for its asset after playback.
    case demoNoLease = "demo_no_lease"
    /// The player started by the demo exits with a non-zero status.
    case demoPlayerFailed = "demo_player_failed"
    /// The demo's verification finds problems in the downloaded package.
    case demoVerificationFailed = "demo_verification_failed"
    /// The demo cannot find the playlist fixture it packages and serves.
    case fixtureNotFound = "fixture_not_found"
    /// The demo's embedded key server stops before it listens.
    case keyServerNotStarted = "key_server_not_started"
    /// The demo's embedded origin server stops before it listens.
    case originNotStarted = "origin_not_started"
    /// The demo is given a network profile that does not exist.
    case unknownProfile = "unknown_profile"

    /// The snake_case code.
    public var description: String { rawValue }
}

extension ErrorCode {
    /// Whether the code is `text` (`error.code == "lease_expired"`, as tools and tests spell it).
    public static func == (code: ErrorCode, text: String) -> Bool { code.rawValue == text }

    /// Whether the code is not `text`.
    public static func != (code: ErrorCode, text: String) -> Bool { code.rawValue != text }

    /// A code read from its snake_case text (another process's answer, a stored failure); `fallback` for a code this
    /// version does not know.
    public init(_ text: String, fallback: ErrorCode) {
        self = ErrorCode(rawValue: text) ?? fallback
    }
}

/// Whether a code that may be absent is `text`.
public func == (code: ErrorCode?, text: String) -> Bool { code?.rawValue == text }

/// Whether a code that may be absent is not `text`.
public func != (code: ErrorCode?, text: String) -> Bool { code?.rawValue != text }
