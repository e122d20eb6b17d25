//! Every S3 error code Tessera answers with, in one table: code, HTTP
//! status and AWS's default message. `S3Code`, its names, statuses and
//! messages all follow from the table.

use http::StatusCode;

/// A code's name in `<Code>`: the variant's own name, or the one given
/// after `as` for codes whose names are not Rust identifiers.
macro_rules! code_name {
    ($code:ident) => {
        stringify!($code)
    };
    ($code:ident $name:literal) => {
        $name
    };
}

macro_rules! s3_codes {
    ($( $(#[$doc:meta])* $code:ident $(as $name:literal)? => $status:ident, $message:literal; )*) => {
        /// The S3 error codes Tessera answers with.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum S3Code {
            $( $(#[$doc])* $code, )*
        }

        impl S3Code {
            /// Every code, in table order.
            pub const ALL: &'static [S3Code] = &[$(S3Code::$code),*];

            /// The code as it appears in `<Code>`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$code => code_name!($code $($name)?),)*
                }
            }

            /// The HTTP status S3 answers this code with.
            pub fn status(self) -> StatusCode {
                match self {
                    $(Self::$code => StatusCode::$status,)*
                }
            }

            /// AWS's message text for this code.
            pub fn default_message(self) -> &'static str {
                match self {
                    $(Self::$code => $message,)*
                }
            }
        }
    };
}

s3_codes! {
    /// The caller may not do this.
    AccessDenied => FORBIDDEN, "Access Denied";
    /// An ACL other than the owner's in a bucket whose ACLs are off (BucketOwnerEnforced).
    AccessControlListNotSupported => BAD_REQUEST, "The bucket does not allow ACLs";
    /// A new bucket's ACL and BucketOwnerEnforced, or BucketOwnerEnforced over an ACL that grants others.
    InvalidBucketAclWithObjectOwnership => BAD_REQUEST, "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting";
    /// A new bucket's public ACL while its public access block is on.
    InvalidBucketAclWithBlockPublicAccessError => BAD_REQUEST, "Bucket cannot have public ACLs set with BlockPublicAccess enabled";
    /// An AccessControlPolicy body that is not one.
    MalformedACLError => BAD_REQUEST, "The XML you provided was not well-formed or did not validate against our published schema";
    /// The bucket has no ownership controls.
    OwnershipControlsNotFoundError => NOT_FOUND, "The bucket ownership controls were not found";
    /// The bucket has no policy.
    NoSuchBucketPolicy => NOT_FOUND, "The bucket policy does not exist";
    /// A bucket policy S3 would refuse.
    MalformedPolicy => BAD_REQUEST, "Policies must be valid JSON and the first byte must be '{'";
    /// The bucket has no object lock.
    ObjectLockConfigurationNotFoundError => NOT_FOUND, "Object Lock configuration does not exist for this bucket";
    /// The version has no retention or legal hold.
    NoSuchObjectLockConfiguration => NOT_FOUND, "The specified object does not have a ObjectLock configuration";
    /// A default retention of no days, or of more than 100 years.
    InvalidRetentionPeriod => BAD_REQUEST, "Default retention period must be a positive integer value.";
    /// The bucket's state does not allow the change.
    InvalidBucketState => CONFLICT, "The request is not valid with the current state of the bucket.";
    /// The bucket has no public access block.
    NoSuchPublicAccessBlockConfiguration => NOT_FOUND, "The public access block configuration was not found";
    /// A body where the request's headers already say everything (an ACL body beside ACL headers).
    UnexpectedContent => BAD_REQUEST, "This request does not support content";
    /// A grant to an email address no account has.
    UnresolvableGrantByEmailAddress => BAD_REQUEST, "The e-mail address you provided does not match any account on record.";
    /// A CORS preflight that no rule of the bucket allows.
    AccessForbidden => FORBIDDEN, "CORSResponse: This CORS request is not allowed. This is usually because the \
                 evalution of Origin, request method / Access-Control-Request-Method or \
                 Access-Control-Request-Headers are not whitelisted by the resource's CORS spec.";
    /// A form upload whose body is not well-formed multipart/form-data.
    MalformedPOSTRequest => BAD_REQUEST, "The body of your POST request is not well-formed multipart/form-data.";
    /// The bucket has no default encryption.
    ServerSideEncryptionConfigurationNotFoundError => NOT_FOUND, "The server side encryption configuration was not found";
    /// The bucket has no lifecycle configuration.
    NoSuchLifecycleConfiguration => NOT_FOUND, "The lifecycle configuration does not exist";
    /// The bucket has no CORS configuration.
    NoSuchCORSConfiguration => NOT_FOUND, "The CORS configuration does not exist";
    /// The Authorization header cannot be parsed.
    AuthorizationHeaderMalformed => BAD_REQUEST, "The authorization header is malformed.";
    /// Presigned URL query parameters are missing or malformed.
    AuthorizationQueryParametersError => BAD_REQUEST, "Error parsing the X-Amz-Credential parameter.";
    /// The body does not match its Content-MD5.
    BadDigest => BAD_REQUEST, "The Content-MD5 you specified did not match what we received.";
    /// The bucket name is taken by another user.
    BucketAlreadyExists => CONFLICT, "The requested bucket name is not available. The bucket namespace is shared by \
                 all users of the system. Please select a different name and try again.";
    /// The caller already owns this bucket.
    BucketAlreadyOwnedByYou => CONFLICT, "Your previous request to create the named bucket succeeded and you already own it.";
    /// The bucket still holds objects or uploads.
    BucketNotEmpty => CONFLICT, "The bucket you tried to delete is not empty";
    /// The body exceeds the largest size accepted.
    EntityTooLarge => BAD_REQUEST, "Your proposed upload exceeds the maximum allowed object size.";
    /// A part other than the last is below the minimum size.
    EntityTooSmall => BAD_REQUEST, "Your proposed upload is smaller than the minimum allowed object size.";
    /// The body ended before its declared length.
    IncompleteBody => BAD_REQUEST, "You did not provide the number of bytes specified by the Content-Length HTTP header";
    /// The server failed.
    InternalError => INTERNAL_SERVER_ERROR, "We encountered an internal error. Please try again.";
    /// The access key does not exist.
    InvalidAccessKeyId => FORBIDDEN, "The AWS Access Key Id you provided does not exist in our records.";
    /// A parameter or header value is invalid.
    InvalidArgument => BAD_REQUEST, "Invalid Argument";
    /// The bucket name breaks the naming rules.
    InvalidBucketName => BAD_REQUEST, "The specified bucket is not valid.";
    /// Content-MD5 is not valid base64 of 16 bytes.
    InvalidDigest => BAD_REQUEST, "The Content-MD5 you specified was invalid.";
    /// A named part is missing or its ETag differs.
    InvalidPart => BAD_REQUEST, "One or more of the specified parts could not be found.  The part may not have \
                 been uploaded, or the specified entity tag may not match the part's entity tag.";
    /// The requested part number is not satisfiable.
    InvalidPartNumber => RANGE_NOT_SATISFIABLE, "The requested partnumber is not satisfiable";
    /// Parts are not listed in ascending order.
    InvalidPartOrder => BAD_REQUEST, "The list of parts was not in ascending order. Parts must be ordered by part number.";
    /// The object's data is lost: too few of its block files are left to
    /// read it (AWS's code for an object that cannot be read as it is).
    /// A 4xx, so that SDKs do not retry what no retry will read.
    InvalidObjectState => FORBIDDEN, "The operation is not valid for the current state of the object.";
    /// The range starts past the end of the object.
    InvalidRange => RANGE_NOT_SATISFIABLE, "The requested range is not satisfiable";
    /// The request is malformed in some other way.
    InvalidRequest => BAD_REQUEST, "Invalid Request";
    /// A write names a KMS key the key service does not have.
    KmsNotFound as "KMS.NotFoundException" => BAD_REQUEST, "The specified KMS key does not exist";
    /// An SSE-C algorithm other than AES256.
    InvalidEncryptionAlgorithmError => BAD_REQUEST, "The encryption request you specified is not valid. The valid value is AES256.";
    /// A tag key or value breaks S3's rules.
    InvalidTag => BAD_REQUEST, "The TagValue you have provided is invalid";
    /// The object has no tag set (GetBucketTagging on an untagged bucket).
    NoSuchTagSet => NOT_FOUND, "The TagSet does not exist";
    /// The version named is a delete marker, which only DELETE may name.
    MethodNotAllowed => METHOD_NOT_ALLOWED, "The specified method is not allowed against this resource.";
    /// The version id names no version of the object.
    NoSuchVersion => NOT_FOUND, "The specified version does not exist.";
    /// The URI cannot be decoded.
    InvalidURI => BAD_REQUEST, "Couldn't parse the specified URI.";
    /// The object key is too long.
    KeyTooLongError => BAD_REQUEST, "Your key is too long";
    /// The XML body is malformed or not what was expected.
    MalformedXML => BAD_REQUEST, "The XML you provided was not well-formed or did not validate against our \
                 published schema";
    /// The request body is larger than allowed.
    MaxMessageLengthExceeded => BAD_REQUEST, "Your request was too big.";
    /// User metadata headers exceed their size limit.
    MetadataTooLarge => BAD_REQUEST, "Your metadata headers exceed the maximum allowed metadata size.";
    /// A body was sent without a declared length.
    MissingContentLength => LENGTH_REQUIRED, "You must provide the Content-Length HTTP header.";
    /// The request's headers together exceed S3's 8 KB limit.
    RequestHeaderSectionTooLarge => BAD_REQUEST, "Your request header section exceeds the maximum allowed size.";
    /// A required security header is missing.
    MissingSecurityHeader => BAD_REQUEST, "Your request was missing a required header";
    /// The bucket does not exist.
    NoSuchBucket => NOT_FOUND, "The specified bucket does not exist";
    /// The object does not exist.
    NoSuchKey => NOT_FOUND, "The specified key does not exist.";
    /// The upload does not exist.
    NoSuchUpload => NOT_FOUND, "The specified upload does not exist. The upload ID may be invalid, or the \
                 upload may have been aborted or completed.";
    /// The operation or feature is not supported.
    NotImplemented => NOT_IMPLEMENTED, "A header you provided implies functionality that is not implemented";
    /// A conditional header did not hold.
    PreconditionFailed => PRECONDITION_FAILED, "At least one of the pre-conditions you specified did not hold";
    /// The request body did not arrive fast enough.
    RequestTimeout => BAD_REQUEST, "Your socket connection to the server was not read from or written to within \
                 the timeout period. Idle connections will be closed.";
    /// The request time is too far from the server's clock.
    RequestTimeTooSkewed => FORBIDDEN, "The difference between the request time and the current time is too large.";
    /// Too much is asked of the gateway at once (connections, GET memory).
    SlowDown => SERVICE_UNAVAILABLE, "Please reduce your request rate.";
    /// The back end cannot serve the request now.
    ServiceUnavailable => SERVICE_UNAVAILABLE, "Please reduce your request rate.";
    /// The signature does not match the request.
    SignatureDoesNotMatch => FORBIDDEN, "The request signature we calculated does not match the signature you provided. \
                 Check your key and signing method.";
    /// The body does not match x-amz-content-sha256.
    XAmzContentSHA256Mismatch => BAD_REQUEST, "The provided 'x-amz-content-sha256' header does not match what was computed.";
}
