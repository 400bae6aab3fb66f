//! Who gave a job's webhook URLs: the model, for a job it created
//! (`"createdBy": "agent"`), unless the user set a URL since (listed in
//! `userWebhooks`); the user otherwise. Delivery treats the model's URLs
//! as the model's: no address of this machine or its networks, no
//! `cron.webhookToken`.

use serde_json::Value;

use super::job::{
    CREATED_BY, CREATED_BY_AGENT, CREATED_BY_MCP, CronJob, DeliveryMode, FailureAlert,
    USER_WEBHOOKS,
};

impl CronJob {
    /// Whether a model created this job (`"createdBy": "agent"`, or
    /// `"mcp"` for a client of the MCP server): the
    /// webhook URLs in it are then the model's, not the user's.
    pub(crate) fn created_by_agent(&self) -> bool {
        matches!(
            self.extra.get(CREATED_BY).and_then(Value::as_str),
            Some(CREATED_BY_AGENT | CREATED_BY_MCP)
        )
    }

    /// Whether `url`, one of this job's webhook URLs, is the model's: the
    /// job is the model's and the user has not set that URL since.
    pub(crate) fn url_is_models(&self, url: &str) -> bool {
        self.created_by_agent()
            && !self
                .extra
                .get(USER_WEBHOOKS)
                .and_then(Value::as_array)
                .is_some_and(|set| set.iter().any(|u| u.as_str() == Some(url.trim())))
    }

    /// Records that the user set `url` (from the command line).
    pub(crate) fn mark_set_by_user(&mut self, url: &str) {
        let url = url.trim();
        let set = self
            .extra
            .entry(USER_WEBHOOKS.to_string())
            .or_insert_with(|| Value::Array(Vec::new()));
        if !set.is_array() {
            *set = Value::Array(Vec::new());
        }
        if let Value::Array(list) = set
            && !list.iter().any(|u| u.as_str() == Some(url))
        {
            list.push(Value::from(url));
        }
    }

    /// Records that a model created this job: `by` is
    /// [`CREATED_BY_AGENT`] or [`CREATED_BY_MCP`].
    pub(crate) fn mark_created_by(&mut self, by: &str) {
        self.extra.insert(CREATED_BY.to_string(), Value::from(by));
    }

    /// The webhook URLs the job posts to, by field: `delivery.to` in
    /// webhook mode, the failure destination's `to` in webhook mode (its
    /// own, or the delivery's when it names none) and `failureAlert.to`
    /// in webhook mode.
    pub(crate) fn webhook_urls(&self) -> Vec<(&'static str, &str)> {
        let mut urls = Vec::new();
        if let Some(delivery) = &self.delivery {
            if delivery.mode == DeliveryMode::Webhook
                && let Some(to) = delivery.to.as_deref()
            {
                urls.push(("delivery.to", to));
            }
            if let Some(dest) = &delivery.failure_destination
                && dest.mode.unwrap_or(delivery.mode) == DeliveryMode::Webhook
                && let Some(to) = dest.to.as_deref()
            {
                urls.push(("delivery.failureDestination.to", to));
            }
        }
        if let Some(FailureAlert::On(alert)) = &self.failure_alert
            && alert.mode == Some(DeliveryMode::Webhook)
            && let Some(to) = alert.to.as_deref()
        {
            urls.push(("failureAlert.to", to));
        }
        urls
    }
}
