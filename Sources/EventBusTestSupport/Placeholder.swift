// Placeholder: filled in by the EventBusTestSupport work.
