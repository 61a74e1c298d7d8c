// Placeholder: filled in by the EventBusSystem work.
