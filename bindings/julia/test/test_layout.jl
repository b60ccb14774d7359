# Struct mirrors against the C layouts (spec §2.1, x86-64; the same numbers tests/header checks
# for the C header), and the TensorView prefix that must be a DLTensor.
@testset "layout" begin
    L = LibAnyFFI
    offsets(T) = [Int(fieldoffset(T, i)) for i in 1:fieldcount(T)]
    @test sizeof(L.TVMFFIObject) == 24 && offsets(L.TVMFFIObject) == [0, 8, 12, 16]
    @test sizeof(L.TVMFFIAny) == 16 && offsets(L.TVMFFIAny) == [0, 4, 8]
    @test sizeof(L.TVMFFIByteArray) == 16
    @test sizeof(L.TVMFFIVersion) == 12
    @test sizeof(DLDataType) == 4 && offsets(DLDataType) == [0, 1, 2]
    @test sizeof(DLDevice) == 8 && offsets(DLDevice) == [0, 4]
    @test sizeof(L.DLTensor) == 48 && offsets(L.DLTensor) == [0, 8, 16, 20, 24, 32, 40]
    @test sizeof(L.DLManagedTensor) == 64 && offsets(L.DLManagedTensor) == [0, 48, 56]
    @test sizeof(L.DLManagedTensorVersioned) == 80 && offsets(L.DLManagedTensorVersioned) == [0, 8, 16, 24, 32]
    @test sizeof(L.TVMFFIShapeCell) == 16
    @test sizeof(L.TVMFFISeqCell) == 32 && offsets(L.TVMFFISeqCell) == [0, 8, 16, 24]
    @test sizeof(L.TVMFFIFunctionCell) == 16
    @test sizeof(L.TVMFFIErrorCell) == 72 && offsets(L.TVMFFIErrorCell) == [0, 16, 32, 48, 56, 64]
    @test sizeof(L.TVMFFITypeInfo) == 72 && offsets(L.TVMFFITypeInfo) == [0, 4, 8, 24, 32, 40, 44, 48, 56, 64]
    for N in 0:4
        T = TensorView{N}
        @test offsets(T)[1:7] == offsets(L.DLTensor)
        @test fieldoffset(T, 8) == 48 && fieldoffset(T, 9) == 48 + 8N
    end
    @test fieldoffset(AnyFFI._ByteArrayBox, 2) == 8  # a TVMFFIByteArray prefix
    v = LibAnyFFI.TVMFFIGetVersion()
    @test (v.major, v.minor) == (0, 1)
end
