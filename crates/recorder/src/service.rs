//! The recorder's front door: a request to an MCP route goes to the MCP relay, every other one
//! to the HTTP engine, so the engine names no MCP and the MCP relay builds on the engine.

use crate::engine::Recorder;
use crate::error::{Error, Result};
use crate::response::Outcome;
use crate::scope::Scope;
use cassette_tape::Request;

impl Recorder {
    /// Answers `request` according to the mode: a request to one of
    /// [`RecorderConfig::mcp_routes`](crate::RecorderConfig::mcp_routes) as a Streamable HTTP
    /// MCP message, any other as an LLM API request.
    pub async fn handle(&self, request: Request) -> Result<Outcome> {
        self.handle_in(request, &Scope::default()).await
    }

    /// Answers `request` for the test `scope` names, as that test asks ([`Scope`]): its mode
    /// (never one that calls the upstream of a replaying recorder), its sequence numbering, its
    /// provenance in what is recorded, its own recordings first when a miss is explained.
    pub async fn handle_in(&self, request: Request, scope: &Scope) -> Result<Outcome> {
        let limit = self.config().max_body;
        if request.body.len() > limit {
            return Err(Error::BodyTooLarge {
                size: request.body.len(),
                limit,
            });
        }
        if self.config().is_mcp_route(&request.target) {
            return crate::mcp::http::handle(self, request).await;
        }
        self.handle_http(request, scope).await
    }
}
