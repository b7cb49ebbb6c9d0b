//! A chat request's history as every chat endpoint (native, OpenAI, Anthropic, Responses)
//! hands it to the model: its messages, their conversation fingerprints, what is kept when
//! they outgrow the context, and the text the model "sees".

use crate::store::Installed;

/// A chat message as the simulator reads it.
#[derive(Debug)]
pub(crate) struct ChatMessage {
    pub(crate) role: String,
    pub(crate) content: String,
    pub(crate) images: usize,
    /// Tool calls of an assistant message and the tool name or call id of a tool result, as
    /// text: part of what the model sees and of the conversation's fingerprint.
    pub(crate) tool_text: String,
}

/// The conversation fingerprints of a chat request (see [`crate::trace::Conversation`]): a
/// hash of every message, and of the messages before the last assistant message, which is
/// what the previous turn of the same conversation sent.
pub(crate) fn conversation(messages: &[ChatMessage]) -> crate::trace::Conversation {
    let hash = |ms: &[ChatMessage]| {
        let mut b = crate::seed::SeedBuilder::new(0).str("conversation");
        for m in ms {
            b = b.str(&m.role).str(&m.content).str(&m.tool_text);
        }
        format!("{:016x}", b.finish())
    };
    let parent = messages.iter().rposition(|m| m.role == "assistant").map(|i| hash(&messages[..i]));
    crate::trace::Conversation { key: hash(messages), parent }
}

/// The messages a chat request keeps when its history outgrows `num_ctx`: the latest that fit,
/// with every system message before them, and always the last one
/// ([`crate::context::history_start`]).
///
/// Returns the messages kept and their rendering.
pub(crate) fn fit_history(messages: Vec<ChatMessage>, model: &Installed, num_ctx: u64) -> (Vec<ChatMessage>, String) {
    let whole = render_messages(&messages);
    let images: usize = messages.iter().map(|m| m.images).sum();
    // A token is at least one byte: a rendering no longer than the context in bytes fits
    // without counting (the real `completionPromptForRequest` takes the same shortcut).
    let extra = u64::from(model.spec.profile.template_tokens) + 256 * images as u64;
    if whole.len() as u64 + extra <= num_ctx
        || u64::from(crate::generation::prompt_tokens(model, &whole, true, images)) <= num_ctx
    {
        return (messages, whole);
    }
    let kept = |i: usize| -> Vec<&ChatMessage> {
        messages[..i].iter().filter(|m| m.role == "system").chain(&messages[i..]).collect()
    };
    let count = |i: usize| {
        let ms = kept(i);
        let images = ms.iter().map(|m| m.images).sum();
        u64::from(crate::generation::prompt_tokens(model, &render(ms.iter().copied()), true, images))
    };
    let last = messages.len().saturating_sub(1);
    let start = crate::context::history_start(last, num_ctx, count);
    let mut out = Vec::with_capacity(messages.len() - start);
    for (i, m) in messages.into_iter().enumerate() {
        if i >= start || m.role == "system" {
            out.push(m);
        }
    }
    let rendered = render_messages(&out);
    (out, rendered)
}

/// Renders messages into the text the model "sees".
pub(crate) fn render_messages(messages: &[ChatMessage]) -> String {
    render(messages.iter())
}

fn render<'a>(messages: impl Iterator<Item = &'a ChatMessage>) -> String {
    let mut out = String::new();
    for m in messages {
        out.push_str(&m.role);
        out.push_str(": ");
        out.push_str(&m.content);
        if !m.tool_text.is_empty() {
            out.push(' ');
            out.push_str(&m.tool_text);
        }
        out.push('\n');
    }
    out
}
