//! A repository's `.mcp.json` (Claude Code's project format): parsed, never started
//! unless the repository is trusted and the user approved the server by name
//! (`crewbox trust --mcp NAME`).
