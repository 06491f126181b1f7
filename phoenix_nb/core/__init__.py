"""The pure Bedrock core: states, events, effects, `transition`, message chain,
request-cycle projection and model registry. No I/O, asyncio, clock or
randomness anywhere below this package."""
