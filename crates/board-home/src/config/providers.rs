//! The model providers a `provider:` key names (`model.provider`,
//! `auxiliary.kanban_decomposer.provider`), by Hermes' names and aliases: each hosted one
//! implies its OpenAI-compatible endpoint and the variable holding its key, used when the
//! file does not set `base_url` (or `api_key_env`) beside it. A name kanban does not know,
//! or a provider that does not speak the OpenAI chat-completions API, needs a `base_url`:
//! without one it is a config error naming the key, never a silent fall back to a local
//! endpoint.

use yaml_rust2::Yaml;

use super::{Config, ConfigError};

/// A provider kanban can call (it speaks the OpenAI chat-completions API).
pub struct Provider {
    /// Its name in `provider:`.
    pub name: &'static str,
    /// Other names Hermes accepts for it.
    pub aliases: &'static [&'static str],
    /// Its endpoint; `None`: the model's own (`model.base_url`, by default a local server).
    pub base_url: Option<&'static str>,
    /// The variable holding its key, when the name implies one.
    pub api_key_env: Option<&'static str>,
}

const fn hosted(
    name: &'static str,
    aliases: &'static [&'static str],
    base_url: &'static str,
    api_key_env: &'static str,
) -> Provider {
    Provider {
        name,
        aliases,
        base_url: Some(base_url),
        api_key_env: Some(api_key_env),
    }
}

const fn local(name: &'static str, aliases: &'static [&'static str]) -> Provider {
    Provider {
        name,
        aliases,
        base_url: None,
        api_key_env: None,
    }
}

/// Every provider kanban can call: `auto`, `custom` and the local servers are the
/// model's endpoint; the others are hosted (Hermes' endpoints; Anthropic and Gemini
/// through their OpenAI-compatible endpoints).
pub const PROVIDERS: &[Provider] = &[
    // Hermes' side calls say `main` for "the main model's provider".
    local("auto", &["main"]),
    local("custom", &["local", "vllm", "llamacpp", "llama.cpp", "llama-cpp"]),
    local("ollama", &[]),
    hosted("openai", &[], "https://api.openai.com/v1", "OPENAI_API_KEY"),
    hosted(
        "openrouter",
        &["or"],
        "https://openrouter.ai/api/v1",
        "OPENROUTER_API_KEY",
    ),
    hosted(
        "anthropic",
        &["claude"],
        "https://api.anthropic.com/v1",
        "ANTHROPIC_API_KEY",
    ),
    hosted(
        "gemini",
        &["google", "google-gemini", "google-ai-studio"],
        "https://generativelanguage.googleapis.com/v1beta/openai",
        "GOOGLE_API_KEY",
    ),
    hosted(
        "deepseek",
        &["deepseek-chat"],
        "https://api.deepseek.com/v1",
        "DEEPSEEK_API_KEY",
    ),
    hosted(
        "xai",
        &["grok", "x-ai", "x.ai"],
        "https://api.x.ai/v1",
        "XAI_API_KEY",
    ),
    hosted(
        "alibaba",
        &["dashscope", "alibaba-cloud", "qwen-dashscope"],
        "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
        "DASHSCOPE_API_KEY",
    ),
    hosted(
        "alibaba-coding-plan",
        &["alibaba_coding", "alibaba-coding", "dashscope-coding"],
        "https://coding-intl.dashscope.aliyuncs.com/v1",
        "ALIBABA_CODING_PLAN_API_KEY",
    ),
    hosted(
        "arcee",
        &["arcee-ai", "arceeai"],
        "https://api.arcee.ai/api/v1",
        "ARCEEAI_API_KEY",
    ),
    hosted(
        "deepinfra",
        &["deep-infra", "deepinfra-ai"],
        "https://api.deepinfra.com/v1/openai",
        "DEEPINFRA_API_KEY",
    ),
    hosted(
        "fireworks",
        &["fireworks-ai", "fw"],
        "https://api.fireworks.ai/inference/v1",
        "FIREWORKS_API_KEY",
    ),
    hosted(
        "gmi",
        &["gmi-cloud", "gmicloud"],
        "https://api.gmi-serving.com/v1",
        "GMI_API_KEY",
    ),
    hosted(
        "huggingface",
        &["hf", "hugging-face", "huggingface-hub"],
        "https://router.huggingface.co/v1",
        "HF_TOKEN",
    ),
    hosted(
        "kilocode",
        &["kilo-code", "kilo", "kilo-gateway"],
        "https://api.kilo.ai/api/gateway",
        "KILOCODE_API_KEY",
    ),
    hosted(
        "kimi-coding",
        &["kimi", "moonshot", "kimi-for-coding"],
        "https://api.moonshot.ai/v1",
        "KIMI_API_KEY",
    ),
    hosted(
        "kimi-coding-cn",
        &["kimi-cn", "moonshot-cn"],
        "https://api.moonshot.cn/v1",
        "KIMI_CN_API_KEY",
    ),
    hosted(
        "nous",
        &["nous-portal", "nousresearch"],
        "https://inference-api.nousresearch.com/v1",
        "NOUS_API_KEY",
    ),
    hosted(
        "novita",
        &["novita-ai", "novitaai"],
        "https://api.novita.ai/openai/v1",
        "NOVITA_API_KEY",
    ),
    hosted(
        "nvidia",
        &["nvidia-nim"],
        "https://integrate.api.nvidia.com/v1",
        "NVIDIA_API_KEY",
    ),
    hosted(
        "ollama-cloud",
        &["ollama_cloud"],
        "https://ollama.com/v1",
        "OLLAMA_API_KEY",
    ),
    hosted(
        "opencode-zen",
        &["opencode", "opencode_zen", "zen"],
        "https://opencode.ai/zen/v1",
        "OPENCODE_ZEN_API_KEY",
    ),
    hosted(
        "opencode-go",
        &["opencode_go", "go", "opencode-go-sub"],
        "https://opencode.ai/zen/go/v1",
        "OPENCODE_GO_API_KEY",
    ),
    hosted(
        "stepfun",
        &["step", "stepfun-coding-plan"],
        "https://api.stepfun.ai/step_plan/v1",
        "STEPFUN_API_KEY",
    ),
    hosted(
        "upstage",
        &["solar"],
        "https://api.upstage.ai/v1",
        "UPSTAGE_API_KEY",
    ),
    hosted(
        "xiaomi",
        &["mimo", "xiaomi-mimo"],
        "https://api.xiaomimimo.com/v1",
        "XIAOMI_API_KEY",
    ),
    hosted(
        "zai",
        &["glm", "z-ai", "z.ai", "zhipu"],
        "https://api.z.ai/api/paas/v4",
        "GLM_API_KEY",
    ),
];

/// Providers Hermes knows that do not speak the OpenAI chat-completions API (or need a
/// sign-in kanban does not do), with their aliases: usable only through a `base_url`.
const NOT_CALLABLE: &[&str] = &[
    "bedrock",
    "aws",
    "aws-bedrock",
    "amazon-bedrock",
    "amazon",
    "vertex",
    "google-vertex",
    "vertex-ai",
    "gcp-vertex",
    "azure-foundry",
    "azure",
    "azure-ai-foundry",
    "azure-ai",
    "copilot",
    "github-copilot",
    "github-models",
    "github-model",
    "github",
    "copilot-acp",
    "github-copilot-acp",
    "copilot-acp-agent",
    "openai-codex",
    "codex",
    "openai_codex",
    "qwen-oauth",
    "qwen",
    "qwen-portal",
    "qwen-cli",
    "minimax",
    "mini-max",
    "minimax-cn",
    "minimax-china",
    "minimax_cn",
    "minimax-oauth",
    "minimax_oauth",
    "minimax-oauth-io",
];

/// The provider of that name or alias (case and spaces aside), if kanban can call it.
pub fn provider(name: &str) -> Option<&'static Provider> {
    let name = name.trim().to_ascii_lowercase();
    PROVIDERS
        .iter()
        .find(|p| p.name == name || p.aliases.contains(&name.as_str()))
}

/// Whether `section.key` (`auxiliary.kanban_decomposer` as one section path) is set in
/// the file (Hermes' blank values were removed before).
fn given(root: &Yaml, path: &[&str]) -> bool {
    let mut node = root;
    for part in path {
        match node {
            Yaml::Hash(entries) => match entries.get(&Yaml::String((*part).to_owned())) {
                Some(next) => node = next,
                None => return false,
            },
            _ => return false,
        }
    }
    !matches!(node, Yaml::Null | Yaml::BadValue)
}

/// Why a provider named at `key` cannot be used without a `base_url` beside it.
fn unusable(key: &str, name: &str) -> ConfigError {
    let name = name.trim();
    let problem = if NOT_CALLABLE.contains(&name.to_ascii_lowercase().as_str()) {
        format!(
            "{name:?} does not speak the OpenAI chat-completions API kanban calls; set base_url \
             beside it to an OpenAI-compatible endpoint for it (a proxy such as LiteLLM)"
        )
    } else {
        let known: Vec<&str> = PROVIDERS.iter().map(|p| p.name).collect();
        format!(
            "{name:?} is not a provider kanban knows ({}); set base_url beside it to its \
             OpenAI-compatible endpoint",
            known.join(", ")
        )
    };
    ConfigError::invalid(key, problem)
}

/// Applies the providers the file names: `model.provider`'s endpoint and key variable
/// where the file sets none; a provider that cannot be called without a `base_url` and
/// has none is an error naming its key. (The decomposer's provider is read through
/// [`Config::decomposer_base_url`]; here it is only checked.)
pub fn apply(root: &Yaml, config: &mut Config) -> Result<(), ConfigError> {
    let model = &mut config.model;
    match provider(&model.provider) {
        Some(p) => {
            if let (Some(url), false) = (p.base_url, given(root, &["model", "base_url"])) {
                url.clone_into(&mut model.base_url);
            }
            if let (Some(var), false) = (p.api_key_env, given(root, &["model", "api_key_env"])) {
                var.clone_into(&mut model.api_key_env);
            }
        }
        None if given(root, &["model", "base_url"]) => {}
        None => return Err(unusable("model.provider", &model.provider)),
    }
    let sides = [
        ("kanban_decomposer", &config.auxiliary.kanban_decomposer.provider),
        ("triage_specifier", &config.auxiliary.triage_specifier.provider),
    ];
    for (side, name) in sides {
        let own_url = given(root, &["auxiliary", side, "base_url"]);
        if provider(name).is_none() && !own_url {
            return Err(unusable(&format!("auxiliary.{side}.provider"), name));
        }
    }
    Ok(())
}
