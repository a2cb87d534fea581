// Triton kernels are embedded as comments in /tmp/src-exp/c0/ccyc4pu4cnzrduczzh7nlagbbaovtmx7mpifvvqsbjhr6xfnyml3/crotxjymmbqyvw5dpfdb3hzotgzbvxreyywmogd7o4y2gi5cz5kf.wrapper.cpp

#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  cpp_fused_add_log_mul_relu_sub_0(const float* in_ptr0,
                       float* out_ptr0)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(64L); x0+=static_cast<int64_t>(8L))
        {
            {
                if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(64L)))
                {
                    auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(8));
                    auto tmp1 = static_cast<float>(0.5);
                    auto tmp2 = at::vec::Vectorized<float>(tmp1);
                    auto tmp3 = tmp0 - tmp2;
                    auto tmp4 = tmp3.log();
                    auto tmp5 = static_cast<float>(2.0);
                    auto tmp6 = at::vec::Vectorized<float>(tmp5);
                    auto tmp7 = tmp4 * tmp6;
                    auto tmp8 = at::vec::clamp_min(tmp7, decltype(tmp7)(0));
                    auto tmp9 = static_cast<float>(1.0);
                    auto tmp10 = at::vec::Vectorized<float>(tmp9);
                    auto tmp11 = tmp8 + tmp10;
                    tmp11.store(out_ptr0 + static_cast<int64_t>(x0));
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}

#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  cpp_fused_1(float* out_ptr0)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(8L); x0+=static_cast<int64_t>(8L))
        {
            {
                if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(8L)))
                {
                    auto tmp0 = x0;
                    auto tmp1 = c10::convert<int64_t>(tmp0);
                    auto tmp2 = at::vec::VectorizedN<int64_t,2>::arange(tmp1, 1);
                    auto tmp3 = static_cast<int64_t>(4);
                    auto tmp4 = at::vec::VectorizedN<int64_t,2>(tmp3);
                    auto tmp5 = at::vec::VecMask<int64_t,2>(tmp2 < tmp4);
                    auto tmp6 = static_cast<int64_t>(2);
                    auto tmp7 = at::vec::VectorizedN<int64_t,2>(tmp6);
                    auto tmp8 = at::vec::VecMask<int64_t,2>(tmp2 < tmp7);
                    auto tmp9 = static_cast<int64_t>(1);
                    auto tmp10 = at::vec::VectorizedN<int64_t,2>(tmp9);
                    auto tmp11 = at::vec::VecMask<int64_t,2>(tmp2 < tmp10);
                    auto tmp12 = static_cast<float>(-0.3504238426685333);
                    auto tmp13 = static_cast<float>(0.15959186851978302);
                    auto tmp14 = at::vec::Vectorized<float>(tmp12);
                    auto tmp15 = at::vec::Vectorized<float>(tmp13);
                    auto tmp16 = decltype(tmp14)::blendv(tmp15, tmp14, tmp11.template cast<float,1>());
                    auto tmp17 = static_cast<int64_t>(3);
                    auto tmp18 = at::vec::VectorizedN<int64_t,2>(tmp17);
                    auto tmp19 = at::vec::VecMask<int64_t,2>(tmp2 < tmp18);
                    auto tmp20 = static_cast<float>(-0.1697988659143448);
                    auto tmp21 = static_cast<float>(-0.23594041168689728);
                    auto tmp22 = at::vec::Vectorized<float>(tmp20);
                    auto tmp23 = at::vec::Vectorized<float>(tmp21);
                    auto tmp24 = decltype(tmp22)::blendv(tmp23, tmp22, tmp19.template cast<float,1>());
                    auto tmp25 = decltype(tmp16)::blendv(tmp24, tmp16, tmp8.template cast<float,1>());
                    auto tmp26 = static_cast<int64_t>(6);
                    auto tmp27 = at::vec::VectorizedN<int64_t,2>(tmp26);
                    auto tmp28 = at::vec::VecMask<int64_t,2>(tmp2 < tmp27);
                    auto tmp29 = static_cast<int64_t>(5);
                    auto tmp30 = at::vec::VectorizedN<int64_t,2>(tmp29);
                    auto tmp31 = at::vec::VecMask<int64_t,2>(tmp2 < tmp30);
                    auto tmp32 = static_cast<float>(-0.20368260145187378);
                    auto tmp33 = static_cast<float>(0.20327766239643097);
                    auto tmp34 = at::vec::Vectorized<float>(tmp32);
                    auto tmp35 = at::vec::Vectorized<float>(tmp33);
                    auto tmp36 = decltype(tmp34)::blendv(tmp35, tmp34, tmp31.template cast<float,1>());
                    auto tmp37 = static_cast<int64_t>(7);
                    auto tmp38 = at::vec::VectorizedN<int64_t,2>(tmp37);
                    auto tmp39 = at::vec::VecMask<int64_t,2>(tmp2 < tmp38);
                    auto tmp40 = static_cast<float>(0.18723256886005402);
                    auto tmp41 = static_cast<float>(0.27135995030403137);
                    auto tmp42 = at::vec::Vectorized<float>(tmp40);
                    auto tmp43 = at::vec::Vectorized<float>(tmp41);
                    auto tmp44 = decltype(tmp42)::blendv(tmp43, tmp42, tmp39.template cast<float,1>());
                    auto tmp45 = decltype(tmp36)::blendv(tmp44, tmp36, tmp28.template cast<float,1>());
                    auto tmp46 = decltype(tmp25)::blendv(tmp45, tmp25, tmp5.template cast<float,1>());
                    tmp46.store(out_ptr0 + static_cast<int64_t>(x0));
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}

#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  cpp_fused_mul_tanh_2(float* in_out_ptr0)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    {
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(32L); x0+=static_cast<int64_t>(8L))
        {
            {
                if(C10_LIKELY(x0 >= static_cast<int64_t>(0) && x0 < static_cast<int64_t>(32L)))
                {
                    auto tmp0 = at::vec::Vectorized<float>::loadu(in_out_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(8));
                    auto tmp1 = tmp0.tanh();
                    auto tmp2 = static_cast<float>(3.0);
                    auto tmp3 = at::vec::Vectorized<float>(tmp2);
                    auto tmp4 = tmp1 * tmp3;
                    tmp4.store(in_out_ptr0 + static_cast<int64_t>(x0));
                }
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}

// Compile cmd
// g++ /tmp/src-exp/c0/ccyc4pu4cnzrduczzh7nlagbbaovtmx7mpifvvqsbjhr6xfnyml3/ckoor2peksib3r6felhprksxv3pau3c3bf6ro2rzkytzbvgx6ucj.kernel.cpp -D TORCH_INDUCTOR_CPP_WRAPPER -D STANDALONE_TORCH_HEADER -D TORCH_INDUCTOR_PRECOMPILE_HEADERS -D  C10_USING_CUSTOM_GENERATED_MACROS -D CPU_CAPABILITY_AVX2  -O3 -DNDEBUG -fno-omit-frame-pointer -g1 -fno-trapping-math -funsafe-math-optimizations -ffinite-math-only -fno-signed-zeros -fno-finite-math-only -fno-unsafe-math-optimizations -fmath-errno -ffp-contract=off -fexcess-precision=fast -fno-tree-loop-vectorize -march=native -fPIC -Wall -std=c++20 -Wno-unused-variable -Wno-unknown-pragmas -pedantic -fopenmp  -include /tmp/torchinductor_root/precompiled_headers/c3v2yu5qpbjpllpsajebiivjguxur7vcwttiwagtzsdbqjp6u5p2.h -I/root/.pyenv/versions/3.11.7/include/python3.11 -I/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/include -I/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/include/torch/csrc/api/include   -mavx2 -mfma -mf16c  -c -o /tmp/src-exp/c0/ccyc4pu4cnzrduczzh7nlagbbaovtmx7mpifvvqsbjhr6xfnyml3/ckoor2peksib3r6felhprksxv3pau3c3bf6ro2rzkytzbvgx6ucj.kernel.o
// Link cmd
// g++ /tmp/src-exp/c0/ccyc4pu4cnzrduczzh7nlagbbaovtmx7mpifvvqsbjhr6xfnyml3/crotxjymmbqyvw5dpfdb3hzotgzbvxreyywmogd7o4y2gi5cz5kf.wrapper.o /tmp/src-exp/c0/ccyc4pu4cnzrduczzh7nlagbbaovtmx7mpifvvqsbjhr6xfnyml3/ckoor2peksib3r6felhprksxv3pau3c3bf6ro2rzkytzbvgx6ucj.kernel.o /tmp/src-exp/c0/ccyc4pu4cnzrduczzh7nlagbbaovtmx7mpifvvqsbjhr6xfnyml3/crotxjymmbqyvw5dpfdb3hzotgzbvxreyywmogd7o4y2gi5cz5kf/cudowoimh4pr3akzs4bqonedlj3oxdj4vioicnkpsp34g2lcjber.weights.o -D TORCH_INDUCTOR_CPP_WRAPPER -D STANDALONE_TORCH_HEADER -D TORCH_INDUCTOR_PRECOMPILE_HEADERS -D  C10_USING_CUSTOM_GENERATED_MACROS -D CPU_CAPABILITY_AVX2  -O3 -DNDEBUG -fno-omit-frame-pointer -g1 -fno-trapping-math -funsafe-math-optimizations -ffinite-math-only -fno-signed-zeros -fno-finite-math-only -fno-unsafe-math-optimizations -fmath-errno -ffp-contract=off -fexcess-precision=fast -fno-tree-loop-vectorize -march=native -shared -fPIC -Wall -std=c++20 -Wno-unused-variable -Wno-unknown-pragmas -pedantic -fopenmp  -I/root/.pyenv/versions/3.11.7/include/python3.11 -I/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/include -I/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/include/torch/csrc/api/include   -mavx2 -mfma -mf16c  -o /tmp/src-exp/c0/ccyc4pu4cnzrduczzh7nlagbbaovtmx7mpifvvqsbjhr6xfnyml3/crotxjymmbqyvw5dpfdb3hzotgzbvxreyywmogd7o4y2gi5cz5kf.wrapper.so  -ltorch -ltorch_cpu -lgomp  -L/root/.pyenv/versions/3.11.7/lib -L/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/torch/lib 
