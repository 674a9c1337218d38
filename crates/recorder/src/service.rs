//! The recorder's front door: a request to an MCP route goes to the MCP relay, every other one
//! to the HTTP engine, so the engine names no MCP and the MCP relay builds on the engine.

use crate::engine::Recorder;
use crate::error::{Error, Result};
use crate::response::Outcome;
use cassette_tape::Request;

impl Recorder {
    /// Answers `request` according to the mode: a request to one of
    /// [`RecorderConfig::mcp_routes`](crate::RecorderConfig::mcp_routes) as a Streamable HTTP
    /// MCP message, any other as an LLM API request.
    pub async fn handle(&self, request: Request) -> Result<Outcome> {
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
        self.handle_http(request).await
    }
}
