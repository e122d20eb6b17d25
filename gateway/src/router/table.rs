//! The macro that turns the table of S3 endpoints (`crate::endpoint`) into
//! everything that follows from it: the [`Endpoint`](crate::endpoint::Endpoint)
//! enum, its names for metrics, its access rules, the routing of a request to
//! it, and the dispatch to its handler behind the access check. Each endpoint
//! is written once, in the table; this file only knows the shape of a row.
//!
//! A row is `Name { field: Type, .. } [ (METHOD, Level, condition, ..) | .. ]
//! Action => handler expression;` (the IAM action the endpoint is, which
//! access is judged on) in one of four sections by scope:
//! `bucket` (the caller must be allowed in an existing bucket; the handler
//! gets an `AuthorizedBucket`), `unsigned` (anyone; the handler gets the
//! existing bucket and decides), `new_bucket` (a bucket to create; the
//! handler gets its name) and `service` (no bucket). Rows are routed in table
//! order, bucket section first: the first rule that holds wins, so a row with
//! a more specific rule comes before a row with a more general one.
//!
//! The expansion names `RequestContext`, `S3Error` and `with_cors` (the CORS
//! headers of bucket answers) as the invoking module imports them, and
//! `Endpoint::version_action` (the action a request naming a version needs
//! instead of its row's), which the invoking module defines, so this module
//! depends on no handler.

/// See the module documentation.
macro_rules! s3_endpoints {
    (
        dispatch($ctx:ident, $body:ident, $bucket:ident);
        bucket {
            $( $(#[$b_doc:meta])* $b_name:ident { $($b_field:ident : $b_ty:ty),* $(,)? }
               [ $( ($b_method:ident, $b_level:ident $(, $b_cond:expr)* $(,)?) )|+ ]
               $b_action:ident
               => $b_handler:expr; )*
        }
        unsigned {
            $( $(#[$u_doc:meta])* $u_name:ident $(as $u_label:literal)? { $($u_field:ident : $u_ty:ty),* $(,)? }
               [ $( ($u_method:ident, $u_level:ident $(, $u_cond:expr)* $(,)?) )|+ ]
               $u_action:ident
               => $u_handler:expr; )*
        }
        new_bucket {
            $( $(#[$n_doc:meta])* $n_name:ident { $($n_field:ident : $n_ty:ty),* $(,)? }
               [ $( ($n_method:ident, $n_level:ident $(, $n_cond:expr)* $(,)?) )|+ ]
               => $n_handler:expr; )*
        }
        service {
            $( $(#[$s_doc:meta])* $s_name:ident { $($s_field:ident : $s_ty:ty),* $(,)? }
               [ $( ($s_method:ident, $s_level:ident $(, $s_cond:expr)* $(,)?) )|+ ]
               $s_action:ident
               => $s_handler:expr; )*
        }
    ) => {
        /// Every S3 operation Tessera serves, with its validated parameters.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub enum Endpoint {
            $( $(#[$b_doc])* $b_name {
                /// Bucket name.
                bucket: String,
                $(#[allow(missing_docs)] $b_field: $b_ty,)*
            }, )*
            $( $(#[$u_doc])* $u_name {
                /// Bucket name.
                bucket: String,
                $(#[allow(missing_docs)] $u_field: $u_ty,)*
            }, )*
            $( $(#[$n_doc])* $n_name {
                /// Bucket name.
                bucket: String,
                $(#[allow(missing_docs)] $n_field: $n_ty,)*
            }, )*
            $( $(#[$s_doc])* $s_name {
                $(#[allow(missing_docs)] $s_field: $s_ty,)*
            }, )*
        }

        impl Endpoint {
            /// The S3 operation name, for metrics and logs.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Self::$b_name { .. } => stringify!($b_name),)*
                    $(Self::$u_name { .. } => s3_endpoints!(@label $u_name $($u_label)?),)*
                    $(Self::$n_name { .. } => stringify!($n_name),)*
                    $(Self::$s_name { .. } => stringify!($s_name),)*
                }
            }

            /// Who may call this endpoint.
            pub fn access(&self) -> $crate::router::Access<'_> {
                use $crate::router::Access;
                use access::Action;
                match self {
                    $(Self::$b_name { bucket, .. } => Access::Bucket {
                        name: bucket,
                        action: self.version_action().unwrap_or(Action::$b_action),
                    },)*
                    $(Self::$u_name { bucket, .. } => Access::Unsigned {
                        name: bucket,
                        action: Action::$u_action,
                    },)*
                    $(Self::$n_name { .. } => Access::CreateBucket,)*
                    $(Self::$s_name { .. } => Access::AnyUser { action: Action::$s_action },)*
                }
            }
        }

        /// The endpoint of the first row whose rule holds for `input`, with its
        /// fields parsed (or the error of a field that does not parse); None
        /// when no row's rule holds.
        fn route(input: &$crate::router::RouteInput<'_>) -> Option<Result<Endpoint, S3Error>> {
            use $crate::router::{Level, RouteField};
            use http::Method;
            $(
                if false $( || (input.method == Method::$b_method
                    && input.level == Level::$b_level $( && ($b_cond)(input) )*) )+ {
                    let build = || -> Result<Endpoint, S3Error> {
                        Ok(Endpoint::$b_name {
                            bucket: input.bucket_name()?,
                            $($b_field: RouteField::from_route(input)?,)*
                        })
                    };
                    return Some(build());
                }
            )*
            $(
                if false $( || (input.method == Method::$u_method
                    && input.level == Level::$u_level $( && ($u_cond)(input) )*) )+ {
                    let build = || -> Result<Endpoint, S3Error> {
                        Ok(Endpoint::$u_name {
                            bucket: input.bucket_name()?,
                            $($u_field: RouteField::from_route(input)?,)*
                        })
                    };
                    return Some(build());
                }
            )*
            $(
                if false $( || (input.method == Method::$n_method
                    && input.level == Level::$n_level $( && ($n_cond)(input) )*) )+ {
                    let build = || -> Result<Endpoint, S3Error> {
                        Ok(Endpoint::$n_name {
                            bucket: input.bucket_name()?,
                            $($n_field: RouteField::from_route(input)?,)*
                        })
                    };
                    return Some(build());
                }
            )*
            $(
                if false $( || (input.method == Method::$s_method
                    && input.level == Level::$s_level $( && ($s_cond)(input) )*) )+ {
                    let build = || -> Result<Endpoint, S3Error> {
                        Ok(Endpoint::$s_name {
                            $($s_field: RouteField::from_route(input)?,)*
                        })
                    };
                    return Some(build());
                }
            )*
            None
        }

        /// Checks the caller's access for `endpoint` and runs its handler;
        /// answers of bucket endpoints carry the bucket's CORS headers.
        #[allow(unused_variables)]
        async fn dispatch(
            $ctx: &RequestContext<'_>,
            endpoint: Endpoint,
            $body: axum::body::Body,
        ) -> Result<axum::response::Response, S3Error> {
            let version_action = endpoint.version_action();
            match endpoint {
                $(Endpoint::$b_name { bucket: name, $($b_field,)* } => {
                    let action = version_action.unwrap_or(access::Action::$b_action);
                    let $bucket = $ctx.authorize_bucket(&name, action).await?;
                    let result = $b_handler;
                    with_cors($ctx, &$bucket, result)
                })*
                $(Endpoint::$u_name { bucket: name, $($u_field,)* } => {
                    let $bucket = $ctx.existing_bucket(&name).await?;
                    let result = $u_handler;
                    with_cors($ctx, &$bucket, result)
                })*
                $(Endpoint::$n_name { bucket: $bucket, $($n_field,)* } => {
                    $ctx.refuse_limited_keys()?;
                    $n_handler
                })*
                $(Endpoint::$s_name { $($s_field,)* } => $s_handler,)*
            }
        }
    };
    (@label $name:ident $label:literal) => { $label };
    (@label $name:ident) => { stringify!($name) };
}

pub(crate) use s3_endpoints;
