//! The HTTP API (`proto/openapi.yaml`): [`handle`] routes a request
//! ([`crate::route`]), authorizes it and hands it to the one handler of its
//! route. Handlers parse, authorize, call and answer: the flows of
//! [`crate::upload`] and [`crate::push`] and the storage
//! ([`crate::storage`]: streams into R2, what reads answer with, the D1
//! tables, the clean-up) move the bytes and the rows, and every rule about
//! packets is packet-core's.
//! Every JSON answer is a [`pillbox_wire`] type (built from rows by their
//! table's file in [`crate::storage::index`]), every refusal a [`Problem`].
//!
//! | module | holds |
//! |---|---|
//! | [`http`] | responses, CORS, request headers and JSON bodies |
//! | [`packets`] | `/v1/packets/…` (uploads whole, reads of every storage form, a packet's recipes and chunks), `/v1/digests/{prefix}`, `/v1/search` |
//! | [`uploads`] | `/v1/uploads/…` |
//! | [`pushes`] | `/v1/pushes/…` |
//! | [`refs`] | `/v1/refs/…`, `/v1/ref-history/…` |
//! | [`clean`] | the scheduled clean-up's bindings and cutoff |
//! | [`bench`] | the benchmark baseline (off unless `BENCH_ROUTES=1`) |

mod bench;
mod clean;
mod http;
mod packets;
mod pushes;
mod refs;
mod uploads;

use worker::{Bucket, D1Database, Env, Request, Response};

use crate::auth::{self, Grant, Need, ReadAccess, Tokens};
use crate::config::Config;
use crate::meter::Meter;
use crate::problem::Problem;
use crate::query::Query;
use crate::route::{self, Method, Route};
use http::{finish, json_response, no_content, problem_response, Answer, Gate};

pub use clean::clean;

/// The R2 bucket's binding (`[[r2_buckets]]` in wrangler.toml).
const BUCKET: &str = "PACKETS";
/// The D1 database's binding (`[[d1_databases]]` in wrangler.toml).
const DATABASE: &str = "INDEX";

/// Handles one request: route, authorize, dispatch, add the headers every
/// answer carries (CORS, caching by who may read).
pub async fn handle(req: Request, env: Env) -> worker::Result<Response> {
    let config = config(&env);
    let (env, meter) = if config.bench_routes {
        crate::timing::begin();
        let (env, meter) = Meter::wrap(env, DATABASE, BUCKET);
        (env, Some(meter))
    } else {
        (env, None)
    };
    let url = req.url()?;
    let method = Method::parse(req.method().as_ref());
    let origin = http::header(&req, "origin");
    let body = req.inner().body();
    let length = http::declared_length(&req);
    let mut gate = Gate::Open;
    let answer = match route::route(method, url.path()) {
        Ok(Route::Assets) => return assets(req, &env).await,
        Ok(route) => {
            let need = auth::required(&route, config.read_access, config.list_access);
            if need.is_some() {
                gate = Gate::Token;
            }
            match authorize(&req, &env, need.as_ref()) {
                Ok(grant) => dispatch(route, req, &env, &config, &url, grant.as_ref()).await,
                Err(p) => Err(p),
            }
        }
        Err(p) => Err(p),
    };
    if let Some(body) = body {
        // Answered before its body was read (auth, limits, malformed URL).
        crate::body::discard(&body, length).await;
    }
    let mut response = match answer {
        Ok(r) => r,
        Err(p) => problem_response(&p)?,
    };
    if let Some(meter) = &meter {
        let headers = response.headers_mut();
        headers.set("pillbox-timing", &crate::timing::report())?;
        headers.set("pillbox-cost", &meter.report(crate::timing::elapsed()))?;
    }
    finish(response, &config, origin.as_deref(), gate)
}

fn config(env: &Env) -> Config {
    Config::from_vars(|name| env.var(name).ok().map(|v| v.to_string()))
}

fn bucket(env: &Env) -> Result<Bucket, Problem> {
    env.bucket(BUCKET)
        .map_err(|e| Problem::internal(format!("the R2 binding {BUCKET}: {e}")))
}

fn database(env: &Env) -> Result<D1Database, Problem> {
    env.d1(DATABASE)
        .map_err(|e| Problem::internal(format!("the D1 binding {DATABASE}: {e}")))
}

async fn assets(req: Request, env: &Env) -> worker::Result<Response> {
    match env.assets("ASSETS") {
        Ok(fetcher) => fetcher.fetch_request(req).await,
        Err(_) => problem_response(&Problem::not_found("no such page")),
    }
}

/// The grant of the request's token if the route needs one (`None` for a
/// public route: no token is looked at), or the refusal.
fn authorize(req: &Request, env: &Env, need: Option<&Need>) -> Result<Option<Grant>, Problem> {
    let Some(need) = need else {
        return Ok(None);
    };
    let secret = |name: &str| env.secret(name).ok().map(|s| s.to_string());
    let tokens = Tokens::from_secrets(
        secret("PILLBOX_TOKENS").as_deref(),
        secret("PILLBOX_TOKEN").as_deref(),
    )?;
    let grant = tokens.authenticate(http::header(req, "authorization").as_deref())?;
    grant.check(need)?;
    Ok(Some(grant))
}

/// Whether the caller may read what a push names as its bases: a base it
/// may not read is ignored, so a push cannot tell whether content it
/// cannot read is stored (its missing list would say).
fn may_read(config: &Config, grant: Option<&Grant>) -> bool {
    config.read_access == ReadAccess::Public || grant.is_some_and(|g| g.allows(&Need::Read))
}

/// One handler per route; the bindings a handler needs are opened here.
async fn dispatch(
    route: Route,
    mut req: Request,
    env: &Env,
    config: &Config,
    url: &worker::Url,
    grant: Option<&Grant>,
) -> Answer {
    let query = Query::from_pairs(
        url.query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned())),
    );
    // Whose push a push route speaks of (every push route needs a token).
    let caller = grant.map_or("", |g| g.id.as_str());
    match route {
        Route::Preflight => no_content(),
        Route::Info => json_response(200, &config.info()),
        Route::ListPackets => packets::list(&database(env)?, &query).await,
        Route::UploadPacket(digest) => {
            let (bucket, db) = (bucket(env)?, database(env)?);
            packets::upload(&mut req, &bucket, &db, config, digest, &query).await
        }
        Route::GetPacket { digest, head } => {
            packets::get(&req, &bucket(env)?, &database(env)?, digest, head).await
        }
        Route::DeletePacket(digest) => {
            packets::delete(&bucket(env)?, &database(env)?, digest).await
        }
        Route::GetManifest(digest) => {
            packets::manifest(&bucket(env)?, &database(env)?, digest).await
        }
        Route::GetMember { digest, path, head } => {
            let (bucket, db) = (bucket(env)?, database(env)?);
            packets::member(&req, &bucket, &db, digest, &path, head).await
        }
        Route::GetRecipes(digest) => {
            packets::recipes(&bucket(env)?, &database(env)?, digest, &query).await
        }
        Route::GetChunks(digest) => {
            let (bucket, db) = (bucket(env)?, database(env)?);
            packets::chunks(&mut req, &bucket, &db, digest).await
        }
        Route::Search => packets::search(&bucket(env)?, &database(env)?, &query).await,
        Route::CreatePush => {
            let (bucket, db) = (bucket(env)?, database(env)?);
            let bases_readable = may_read(config, grant);
            pushes::create(
                &mut req,
                &bucket,
                &db,
                config,
                &query,
                bases_readable,
                caller,
            )
            .await
        }
        Route::GetPush(id) => {
            let reveal = may_read(config, grant);
            pushes::get(&bucket(env)?, &database(env)?, config, &id, reveal, caller).await
        }
        Route::AbortPush(id) => pushes::abort(&bucket(env)?, &database(env)?, &id, caller).await,
        Route::PushRecipes(id) => {
            let (bucket, db) = (bucket(env)?, database(env)?);
            pushes::recipes(&mut req, &bucket, &db, &id, caller).await
        }
        Route::PushPart { id, number } => {
            let (bucket, db) = (bucket(env)?, database(env)?);
            let who = pushes::Caller {
                id: caller,
                reveal: may_read(config, grant),
            };
            pushes::part(&req, &bucket, &db, config, (&id, number), who).await
        }
        Route::CompletePush(id) => {
            pushes::complete(&bucket(env)?, &database(env)?, &id, caller).await
        }
        Route::BenchBaseline => {
            let (bucket, db) = (bucket(env)?, database(env)?);
            bench::baseline(&req, &bucket, &db, config).await
        }
        Route::BenchCosts => bench::costs(config),
        Route::CreateUpload => {
            uploads::create(&mut req, &bucket(env)?, &database(env)?, config).await
        }
        Route::GetUpload(id) => uploads::get(&database(env)?, &id).await,
        Route::UploadPart { id, number } => {
            uploads::part(&req, &bucket(env)?, &database(env)?, &id, number).await
        }
        Route::CompleteUpload(id) => {
            uploads::complete(&bucket(env)?, &database(env)?, config, &id).await
        }
        Route::AbortUpload(id) => uploads::abort(&bucket(env)?, &database(env)?, &id).await,
        Route::ListRefs => refs::list(&database(env)?, &query).await,
        Route::GetRef(name) => refs::get(&database(env)?, &name).await,
        Route::PutRef(name) => {
            let by = grant.map(|g| g.id.as_str());
            refs::put(&mut req, &database(env)?, &name, by).await
        }
        Route::RefHistory(name) => refs::history(&database(env)?, &name, &query).await,
        Route::DigestsByPrefix(prefix) => {
            packets::by_prefix(&database(env)?, &prefix, &query).await
        }
        Route::DeleteRef(name) => refs::delete(&req, &database(env)?, &name).await,
        Route::Assets => Err(Problem::not_found("no such page")),
    }
}
