// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "app",
    dependencies: [.package(path: "../eventbus")],   // or .package(url: "file:///src/eventbus", branch: "main")
    targets: [.executableTarget(name: "app", dependencies: [.product(name: "EventBus", package: "eventbus")])]
)
